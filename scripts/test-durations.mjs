// A node:test reporter for `npm test -- --record-durations` (scripts/test.mjs): the seconds each file
// the runner started took, as the sum of its top-level tests and suites (they run one after
// another in a file), in one JSON object keyed by the file's path.
export default async function* durations(source) {
  const seconds = {};
  for await (const event of source) {
    if ((event.type === "test:pass" || event.type === "test:fail") && event.data.nesting === 0 && event.data.file) {
      seconds[event.data.file] = (seconds[event.data.file] ?? 0) + (event.data.details?.duration_ms ?? 0) / 1000;
    }
  }
  yield JSON.stringify(seconds);
}
