// Encryption at rest of what the deployment holds for others: OAuth tokens and client secrets.
// AES-256-GCM (NIST SP 800-38D) with a random 96-bit nonce per value, so a value written twice
// never repeats a (key, nonce) pair; the row it belongs to is the additional authenticated data,
// so a ciphertext moved to another row does not decrypt. The key never enters the store: only its
// id (a digest prefix, which reveals nothing of it) is kept beside each ciphertext, so a wrong key
// is told apart from a damaged value, and rotate-key knows what it has to re-encrypt.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { closeSync, constants, openSync, writeSync } from "node:fs";
import { usage } from "../errors.ts";
import type { KeySource } from "./config.ts";
import { IF_LEAKED, KEY_FILE_BYTES, readPrivateFile } from "./private-file.ts";

export type Key = { id: string; bytes: Buffer };
export type Sealed = { keyId: string; value: string };

const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export function keyId(bytes: Buffer): string {
  return createHash("sha256").update("subs-deployment-key-id\0").update(bytes).digest("hex").slice(0, 16);
}

/** base64 (or base64url) of 32 bytes, or 64 hex digits; surrounding whitespace ignored. */
export function parseKey(text: string, from: string): Key {
  const trimmed = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, "hex") : Buffer.from(trimmed, "base64");
  if (bytes.length !== KEY_BYTES || (!/^[0-9a-fA-F]{64}$/.test(trimmed) && !/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed))) {
    throw usage(`${from}: not a key: it must hold 32 random bytes in base64 (44 characters) or hex (64)`, { hint: "make one with `openssl rand -base64 32`; into a file of mode 0600: `(umask 077; openssl rand -base64 32 > deployment.key)`" });
  }
  return { id: keyId(bytes), bytes };
}

export function newKeyText(): string {
  return randomBytes(KEY_BYTES).toString("base64");
}

/**
 * The key a source names; `undefined` when it names a key file that does not exist. A key file
 * must be the running user's own regular file that no one else may read (private-file.ts): one
 * others could read may have been copied, and with it every credential it opens.
 */
export function readKey(source: KeySource): Key | undefined {
  if ("value" in source) return parseKey(source.value, source.from);
  const text = readPrivateFile({
    from: source.from,
    shown: source.file,
    file: source.file,
    maxBytes: KEY_FILE_BYTES,
    ifLeaked: IF_LEAKED.key,
  });
  return text === undefined ? undefined : parseKey(text, `${source.from} ${source.file}`);
}

/** Writes a new key file, 0600 from its first byte; never over an existing file. */
export function createKeyFile(file: string): Key {
  const text = newKeyText();
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, `${text}\n`);
  } finally {
    closeSync(fd);
  }
  return parseKey(text, file);
}

export function seal(key: Key, plaintext: string, aad: string): Sealed {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key.bytes, nonce);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { keyId: key.id, value: `${nonce.toString("base64url")}.${body.toString("base64url")}` };
}

/** Thrown when a value cannot be opened with the key given: never with any of the value. */
/** A sealed value this key does not open: another key's (a rotation this process did not see), or damaged. */
export class KeyMismatch extends Error {
  override name = "KeyMismatch";
}

export function open(key: Key, sealed: Sealed, aad: string): string {
  if (sealed.keyId !== key.id) throw new KeyMismatch(`sealed under key ${sealed.keyId}, not ${key.id}`);
  const [nonceText, bodyText] = sealed.value.split(".");
  const nonce = Buffer.from(nonceText ?? "", "base64url");
  const body = Buffer.from(bodyText ?? "", "base64url");
  if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES) throw new KeyMismatch("a damaged value");
  try {
    const decipher = createDecipheriv("aes-256-gcm", key.bytes, nonce);
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString("utf8");
  } catch {
    throw new KeyMismatch("the value does not authenticate under this key");
  }
}
