// One possessive for every name subs writes in a sentence: "sentry's tools", but
// "docs' tools", not "docs's". Ids and agent names are lowercase ASCII (the file's rule); any
// name ending in s takes the bare apostrophe.

export function possessive(name: string): string {
  return /s$/i.test(name) ? `${name}'` : `${name}'s`;
}
