// The words of `subs mcp login`, local and with [remote] (issue 15: one voice). Both logins take
// the same steps (contact, send the person to a page, wait for consent, say what was granted), and
// each step is said here once, so the two cannot drift apart. Text from servers (URLs, issuers)
// is passed through `shown` by whoever prints these lines.

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
} as const;
