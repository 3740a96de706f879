// Signals made of other signals, and deadlines, that hold under garbage collection and keep
// nothing behind. On Node 20 the signal of AbortSignal.timeout() is held only weakly by its own
// timer, and AbortSignal.any() holds its sources weakly too: once nothing else refers to the
// timeout signal, a collection removes it, its timer fires on nothing, and the wait goes on (a
// deployment call waited 302 s, undici's own limit, instead of its per-attempt deadline). And
// AbortSignal.any() adds the signal it makes (a WeakRef to it) to each source's set of dependants
// and never takes it out, not even once that signal is collected: about 60 B on each source per
// call, for as long as the source lives (100,000 calls on one long-lived signal left 100,000 in its
// set). So here a source holds what follows it through one abort listener of ours, and the caller
// lets go when the work is over; a timer holds the controller it aborts.

export type AnySignal = {
  /** Aborts as soon as one of the given signals does, with its reason (at once when one already has), or on `abort`. */
  signal: AbortSignal;
  /** Aborts `signal` with `reason` and lets go of the given signals. */
  abort: (reason?: unknown) => void;
  /** Lets go of the given signals; call it when the work is over. */
  release: () => void;
};

/**
 * Per source, what follows it now and the one listener that tells them: a listener per follower
 * would pass the 10 an EventTarget warns at (MaxListenersExceededWarning) with 11 requests in
 * flight on one session. Both go once nothing follows the source.
 */
const following = new WeakMap<AbortSignal, { followers: Set<() => void>; listener: () => void }>();

function follow(source: AbortSignal, onAbort: () => void): () => void {
  const entry = following.get(source) ?? listenTo(source);
  const { followers, listener } = entry;
  followers.add(onAbort);
  return () => {
    if (!followers.delete(onAbort) || followers.size > 0) return;
    source.removeEventListener("abort", listener);
    if (following.get(source) === entry) following.delete(source);
  };
}

function listenTo(source: AbortSignal): { followers: Set<() => void>; listener: () => void } {
  const followers = new Set<() => void>();
  const listener = () => {
    following.delete(source);
    for (const follower of [...followers]) follower();
  };
  const entry = { followers, listener };
  following.set(source, entry);
  source.addEventListener("abort", listener, { once: true });
  return entry;
}

/** How many signals of anySignal() follow `signal` now (none once all were released). */
export function followersOf(signal: AbortSignal): number {
  return following.get(signal)?.followers.size ?? 0;
}

/**
 * AbortSignal.any() that leaves nothing on its sources once released: use it wherever a source
 * outlives the work (a session's signal, the process's), or the sources keep one dependant per call.
 */
export function anySignal(signals: readonly (AbortSignal | null | undefined)[]): AnySignal {
  const controller = new AbortController();
  const unfollow: Array<() => void> = [];
  const release = () => {
    for (const stop of unfollow) stop();
    unfollow.length = 0;
  };
  const abort = (reason?: unknown) => {
    release();
    controller.abort(reason);
  };
  for (const source of signals) {
    if (!source) continue;
    if (source.aborted) {
      abort(source.reason);
      break;
    }
    unfollow.push(follow(source, () => abort(source.reason)));
  }
  return { signal: controller.signal, abort, release };
}

export type Deadline = {
  /** Aborts at the deadline, or as soon as one of the given signals does (with its reason). */
  signal: AbortSignal;
  /** The deadline itself passed (not one of the given signals). */
  timedOut: () => boolean;
  /** Stops the timer and lets go of the given signals; call it when the work is over. */
  clear: () => void;
};

/** The reason AbortSignal.timeout() gives, so callers that look for a TimeoutError still find one. */
export function timeoutReason(ms: number): DOMException {
  return new DOMException(`no answer within ${ms / 1000}s`, "TimeoutError");
}

/**
 * A signal that aborts after `ms` or when any of `signals` aborts. The timer is ref'd: a wait on
 * nothing but the deadline still ends at the deadline rather than when the event loop empties.
 */
export function withDeadline(signals: AbortSignal | readonly (AbortSignal | undefined)[] | undefined, ms: number, reason: () => unknown = () => timeoutReason(ms)): Deadline {
  const any = anySignal(Array.isArray(signals) ? signals : [signals]);
  let expired = false;
  const timer = any.signal.aborted
    ? undefined
    : setTimeout(() => {
        expired = true;
        any.abort(reason());
      }, ms);
  any.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  return {
    signal: any.signal,
    timedOut: () => expired,
    clear: () => {
      clearTimeout(timer);
      any.release();
    },
  };
}
