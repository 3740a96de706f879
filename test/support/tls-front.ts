// TLS in front of a plain loopback test server, with a self-signed certificate for 127.0.0.1 (an IP
// SAN) made for this run only: every request and answer passed through as they are. For the
// cases a machine meets with a team's own CA: an untrusted certificate, and NODE_EXTRA_CA_CERTS.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

export type TlsFront = {
  /** https://127.0.0.1:PORT */
  url: string;
  /** The certificate, PEM: what NODE_EXTRA_CA_CERTS names to trust it. */
  certFile: string;
  /** Handshakes the front failed (a client that refused its certificate): each one a connection tried. */
  refusedHandshakes(): number;
  close(): Promise<void>;
};

export async function startTlsFront(target: URL): Promise<TlsFront> {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-tls-"));
  const certFile = path.join(dir, "cert.pem");
  const keyFile = path.join(dir, "key.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
  const tls = createHttpsServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const forward = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  let refused = 0;
  tls.on("tlsClientError", () => refused++);
  await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(tls.address() as AddressInfo).port}`,
    certFile,
    refusedHandshakes: () => refused,
    async close() {
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
