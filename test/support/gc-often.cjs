// Preloaded (`node --expose-gc --require`) by the deadline tests: collects garbage every 50 ms, so
// a deadline held only weakly (AbortSignal.timeout inside AbortSignal.any on Node 20) is lost.
"use strict";
setInterval(() => globalThis.gc(), 50).unref();
