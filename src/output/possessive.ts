// The possessive lives with the other rules of text the core also uses (text/possessive.ts); the
// output layer's commands take it from here.
export { possessive } from "../text/possessive.ts";
