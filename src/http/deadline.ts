// Deadlines that hold under garbage collection. On Node 20 the signal of AbortSignal.timeout() is
// held only weakly by its own timer, and AbortSignal.any() holds its sources weakly too: once
// nothing else refers to the timeout signal, a collection removes it, its timer fires on nothing,
// and the wait goes on (a deployment call waited 302 s, undici's own limit, instead of its
// per-attempt deadline). Here the timer holds the controller it aborts, the caller's signals hold
// it through their listeners, and the caller clears both when done.

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
  const controller = new AbortController();
  let expired = false;
  const sources = (Array.isArray(signals) ? signals : [signals]).filter((s): s is AbortSignal => s !== undefined);
  const listeners: Array<[AbortSignal, () => void]> = [];
  const clear = () => {
    clearTimeout(timer);
    for (const [source, listener] of listeners) source.removeEventListener("abort", listener);
    listeners.length = 0;
  };
  const timer = setTimeout(() => {
    expired = true;
    clear();
    controller.abort(reason());
  }, ms);
  for (const source of sources) {
    if (source.aborted) {
      clear();
      controller.abort(source.reason);
      break;
    }
    const listener = () => {
      clear();
      controller.abort(source.reason);
    };
    source.addEventListener("abort", listener, { once: true });
    listeners.push([source, listener]);
  }
  return { signal: controller.signal, timedOut: () => expired, clear };
}
