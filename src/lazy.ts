/** `build()`'s value, built on the first call and kept: for what only some runs need (a schema, a compiled pattern). */
export function lazily<T>(build: () => T): () => T {
  let value: T | undefined;
  let built = false;
  return () => {
    if (!built) {
      value = build();
      built = true;
    }
    return value as T;
  };
}
