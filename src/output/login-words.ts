// The words of `subs mcp login`, local and with [remote]. Both logins take
// the same steps (contact, send the person to a page, wait for consent, say what was granted), and
// each step is said here once, so the two cannot drift apart. Text from servers (URLs, issuers)
// is passed through `shown` by whoever prints these lines.
import type { LoginStep } from "../backend/types.ts";
import { silentProgress, type Reporter } from "../report.ts";

const seconds = (ms: number) => `${Math.round(ms / 1000)}s`;
const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));

export const loginWords = {
  /** Progress while the server (local) or the deployment ([remote]) is asked how to authorize. */
  contacting: (id: string, at: string) => `Contacting ${id} at ${at}`,
  contactingThrough: (id: string, deployment: string) => `Contacting ${id} through ${deployment}`,
  /** Its end: where the consent will be given. */
  authorizesAt: (id: string, at: string) => `${id} authorizes at ${at}`,
  authorizesThrough: (id: string, deployment: string) => `${id} authorizes through ${deployment}`,
  couldNotStart: (id: string) => `Could not start the login of ${id}`,
  opening: (id: string, origin: string) => `Opening the browser to authorize ${id} at ${origin} …`,
  ifItDoesNotOpen: (url: string) => `If it does not open, visit:\n  ${url}`,
  browserFailed: (error: unknown) => `could not open a browser (${reason(error)}); open the URL above in a browser yourself`,
  visit: (id: string, url: string) => `Open this URL in a browser to authorize ${id}:\n  ${url}`,
  waiting: (id: string, timeoutMs: number) => `Waiting for consent for ${id} (Ctrl-C to cancel, times out in ${seconds(timeoutMs)})`,
  received: (id: string) => `Consent received for ${id}`,
  notGiven: (id: string) => `Consent not given for ${id}`,
  stopped: (id: string) => `Stopped waiting for consent for ${id}`,
  noConsent: (id: string) => `No consent for ${id}`,
  /** A connection whose headers name variables, with [remote]: their values go to the deployment instead of a consent. */
  askValue: (name: string, id: string) => `${name} for ${id} (input hidden): `,
  handingOver: (id: string, names: readonly string[], deployment: string) => `Handing ${names.join(", ")} for ${id} to ${deployment}`,
  handedOver: (id: string, names: readonly string[], deployment: string) => `${deployment} holds ${names.join(", ")} for ${id}`,
  couldNotHandOver: (id: string, deployment: string) => `Could not hand the values for ${id} to ${deployment}`,
} as const;

/**
 * The steps of a login (local: auth/login.ts; on a deployment: backend/deployment.ts) as the
 * person sees them on `reporter`: the first request to the server's (or the deployment's) answer
 * on one progress line, then the URL, then the wait for consent on another. While the person may
 * paste an address on this terminal, the wait is one plain line: a spinner redrawing it would
 * garble what they type.
 */
export function loginSteps(reporter: Reporter): (step: LoginStep) => void {
  let preparing = silentProgress;
  let waiting = silentProgress;
  return (step) => {
    switch (step.step) {
      case "contacting":
        preparing = reporter.progress(loginWords.contacting(step.id, step.origin));
        return;
      case "contacting_deployment":
        preparing = reporter.progress(loginWords.contactingThrough(step.id, step.deployment));
        return;
      case "could_not_start":
        return preparing.fail(loginWords.couldNotStart(step.id));
      case "open":
        return preparing.succeed(`${step.id} asks for no credential`);
      case "preparing":
        return preparing.update(`Preparing the login of ${step.id} at ${step.issuer}`);
      case "ready":
        return preparing.succeed(loginWords.authorizesAt(step.id, step.issuer));
      case "ready_on_deployment":
        return preparing.succeed(loginWords.authorizesThrough(step.id, step.deployment));
      case "handing_over":
        preparing = reporter.progress(loginWords.handingOver(step.id, step.names, step.deployment));
        return;
      case "handed_over":
        return preparing.succeed(loginWords.handedOver(step.id, step.names, step.deployment));
      case "hand_over_failed":
        return preparing.fail(loginWords.couldNotHandOver(step.id, step.deployment));
      case "foreign_response":
        return reporter.warn(`a response that is not for this login (no \`state\`, or another one) reached the loopback listener; ignored, still waiting for ${step.id}`);
      case "opening_browser":
        reporter.info(loginWords.opening(step.id, new URL(step.url).origin));
        return reporter.info(loginWords.ifItDoesNotOpen(step.url));
      case "browser_failed":
        return reporter.warn(loginWords.browserFailed(step.error));
      case "visit":
        return reporter.info(loginWords.visit(step.id, step.url));
      case "paste_offered":
        return reporter.info("If the browser cannot reach this machine, paste the address it was redirected to here and press Enter.");
      case "paste_refused":
        return reporter.warn(step.why);
      case "waiting": {
        const text = loginWords.waiting(step.id, step.timeoutMs);
        if (!step.pasting) waiting = reporter.progress(text);
        else {
          reporter.info(`${text} …`);
          waiting = silentProgress;
        }
        return;
      }
      case "waited":
        if (step.outcome === "received") return waiting.succeed(loginWords.received(step.id));
        return waiting.fail(step.outcome === "not_given" ? loginWords.notGiven(step.id) : step.outcome === "stopped" ? loginWords.stopped(step.id) : loginWords.noConsent(step.id));
    }
  };
}
