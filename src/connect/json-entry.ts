// One server entry in another client's JSON (or JSON-with-comments) file, edited as text so that
// everything else stays byte for byte: key order, indentation, line endings, comments, the final
// newline. jsonc-parser (VS Code's own) finds where things are; the text put in is formatted here
// in the file's own style. Its `modify` re-formats the sibling before an insertion, so an entry
// added and removed again would not leave the file as it was; an insertion right after the last
// property, cut again exactly, does.
import { parseTree, type Node, type ParseError } from "jsonc-parser";

/** Why a file cannot be edited; the caller words the error (the file's text is never quoted: it may hold tokens). */
export class FileShapeError extends Error {}

type Doc = { text: string; root: Node | undefined };

function parse(text: string): Doc {
  // A byte-order mark is kept; parsed as a space, so offsets stay those of the text.
  const source = text.charCodeAt(0) === 0xfeff ? ` ${text.slice(1)}` : text;
  if (source.trim() === "") return { text, root: undefined };
  const errors: ParseError[] = [];
  const root = parseTree(source, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0 || root === undefined) {
    const at = errors[0]?.offset ?? 0;
    const before = source.slice(0, at);
    throw new FileShapeError(`is not valid JSON (line ${before.split("\n").length}, column ${at - before.lastIndexOf("\n")})`);
  }
  if (root.type !== "object") throw new FileShapeError("does not hold a JSON object");
  return { text, root };
}

const keyOf = (property: Node): string => property.children![0]!.value as string;

/** The property `key` of `object`, refusing a key written twice (which one a client reads is its own choice). */
function propertyOf(object: Node, key: string, where: readonly string[]): Node | undefined {
  const found = (object.children ?? []).filter((p) => keyOf(p) === key);
  if (found.length > 1) throw new FileShapeError(`has ${shownPath([...where, key])} twice`);
  return found[0];
}

const shownPath = (keys: readonly string[]) => keys.map((k) => JSON.stringify(k)).join(" › ");

/** The deepest object along `path` that exists, and the keys below it that do not. */
function locate(root: Node, path: readonly string[]): { object: Node; missing: string[] } {
  let object = root;
  for (let n = 0; n < path.length; n++) {
    const property = propertyOf(object, path[n]!, path.slice(0, n));
    if (!property) return { object, missing: path.slice(n) };
    const value = property.children![1]!;
    if (value.type !== "object") throw new FileShapeError(`has ${shownPath(path.slice(0, n + 1))} that is not an object`);
    object = value;
  }
  return { object, missing: [] };
}

/** The entry `name` under `container` (a path of keys from the top), or undefined when absent. */
export function readEntry(text: string, container: readonly string[], name: string): { value: unknown } | undefined {
  const { root } = parse(text);
  if (!root) return undefined;
  const { object, missing } = locate(root, container);
  if (missing.length > 0) return undefined;
  const property = propertyOf(object, name, container);
  return property ? { value: valueOf(property.children![1]!) } : undefined;
}

function valueOf(node: Node): unknown {
  switch (node.type) {
    case "object":
      return Object.fromEntries((node.children ?? []).map((p) => [keyOf(p), valueOf(p.children![1]!)]));
    case "array":
      return (node.children ?? []).map(valueOf);
    default:
      return node.value;
  }
}

type Style = { eol: string; unit: string };

/** The file's line ending and indentation unit (two spaces for an empty or one-line file, as the clients write). */
function styleOf(text: string): Style {
  const eol = text.includes("\r\n") ? "\r\n" : "\n";
  let unit: string | undefined;
  for (const m of text.matchAll(/\n([ \t]+)["}/]/g)) {
    const indent = m[1]!;
    if (indent.startsWith("\t")) {
      unit = "\t";
      break;
    }
    if (unit === undefined || indent.length < unit.length) unit = indent;
  }
  return { eol, unit: unit ?? "  " };
}

/** The whitespace that starts the line `offset` is on. */
function lineIndent(text: string, offset: number): string {
  const start = text.lastIndexOf("\n", offset - 1) + 1;
  return /^[ \t]*/.exec(text.slice(start))![0];
}

const onOneLine = (text: string, from: number, to: number) => !text.slice(from, to).includes("\n");

/** `value` as JSON in the file's style, its lines after the first indented by `indent`. */
const formatted = (value: unknown, indent: string, style: Style) => JSON.stringify(value, null, style.unit).split("\n").join(style.eol + indent);

type Edit = { offset: number; length: number; content: string };

const applied = (text: string, edit: Edit) => text.slice(0, edit.offset) + edit.content + text.slice(edit.offset + edit.length);

/** The edit that adds `key: value` to `object`: after its last property, or inside it when it is empty. */
function insertion(doc: Doc, object: Node, key: string, value: unknown, style: Style): Edit {
  const { text } = doc;
  const properties = object.children ?? [];
  const last = properties[properties.length - 1];
  if (last) {
    const end = last.offset + last.length;
    // An object written on one line stays on one line.
    if (onOneLine(text, object.offset, end)) return { offset: end, length: 0, content: `, ${JSON.stringify(key)}: ${JSON.stringify(value)}` };
    const indent = lineIndent(text, last.offset);
    return { offset: end, length: 0, content: `,${style.eol}${indent}${JSON.stringify(key)}: ${formatted(value, indent, style)}` };
  }
  const outer = lineIndent(text, object.offset);
  const inner = outer + style.unit;
  const property = `${style.eol}${inner}${JSON.stringify(key)}: ${formatted(value, inner, style)}`;
  const inside = text.slice(object.offset + 1, object.offset + object.length - 1);
  // An empty object `{}` (or `{ }`) opens up; one holding only comments keeps them after the new property.
  if (inside.trim() === "") return { offset: object.offset, length: object.length, content: `{${property}${style.eol}${outer}}` };
  return { offset: object.offset + 1, length: 0, content: property };
}

/**
 * `text` with the entry `name` under `container` set to `value`: added after the last entry (the
 * objects on the way created, added last where they go), or, when it exists, changed in place:
 * each changed value replaced where it is when the entry keeps its keys, else the whole entry.
 */
export function putEntry(text: string, container: readonly string[], name: string, value: Record<string, unknown>): string {
  const doc = parse(text);
  const style = styleOf(text);
  if (!doc.root) {
    let nested: unknown = { [name]: value };
    for (const key of [...container].reverse()) nested = { [key]: nested };
    // A file that is not there (or empty) is written as the clients write theirs: two spaces, a final newline.
    return formatted(nested, "", style) + style.eol;
  }
  const { object, missing } = locate(doc.root, container);
  if (missing.length > 0) {
    let nested: unknown = { [name]: value };
    for (const key of missing.slice(1).reverse()) nested = { [key]: nested };
    return applied(text, insertion(doc, object, missing[0]!, nested, style));
  }
  const property = propertyOf(object, name, container);
  if (!property) return applied(text, insertion(doc, object, name, value, style));
  const node = property.children![1]!;
  const current = node.type === "object" ? (node.children ?? []) : undefined;
  const keys = Object.keys(value);
  if (current && current.length === keys.length && current.every((p, n) => keyOf(p) === keys[n])) {
    // Same keys in the same order: only the values that differ are replaced, last first so offsets hold.
    let edited = text;
    for (const p of [...current].reverse()) {
      const key = keyOf(p);
      const inner = p.children![1]!;
      if (sameJson(valueOf(inner), value[key])) continue;
      const indent = lineIndent(text, p.offset);
      const content = onOneLine(text, node.offset, node.offset + node.length) ? JSON.stringify(value[key]) : formatted(value[key], indent, style);
      edited = applied(edited, { offset: inner.offset, length: inner.length, content });
    }
    return edited;
  }
  const indent = lineIndent(text, property.offset);
  const content = onOneLine(text, node.offset, node.offset + node.length) && node.type === "object" ? JSON.stringify(value) : formatted(value, indent, style);
  return applied(text, { offset: node.offset, length: node.length, content });
}

/**
 * `text` without the entry `name` under `container` (unchanged when it is absent). What
 * putEntry added is cut exactly: the entry with the comma and line break before it. Objects on
 * the way that putEntry created (added last, now empty) go too, and a file that would be left
 * as exactly what putEntry writes for a missing file becomes undefined: delete it.
 */
export function deleteEntry(text: string, container: readonly string[], name: string): string | undefined {
  const doc = parse(text);
  if (!doc.root) return text;
  const { object, missing } = locate(doc.root, container);
  if (missing.length > 0) return text;
  const property = propertyOf(object, name, container);
  if (!property) return text;
  // Going up while each object on the way holds nothing else: the outermost of them is what putEntry
  // created when it is the last property of an object that holds more (it was added after them).
  const chain = [property];
  for (let n = container.length - 1; n >= 0 && chain[0]!.parent!.children!.length === 1; n--) {
    const holder = chain[0]!.parent!.parent;
    if (!holder || holder.type !== "property") break;
    chain.unshift(holder);
  }
  const outermost = chain[0]!;
  const siblings = outermost.parent!.children!;
  if (outermost !== property && siblings.length > 1 && siblings[siblings.length - 1] === outermost) return applied(text, cut(doc, outermost));
  if (outermost !== property && siblings.length === 1 && outermost.parent === doc.root && isFreshFile(text, container, name, doc)) return undefined;
  if (object.children!.length === 1) {
    const inside = text.slice(object.offset + 1, property.offset) + text.slice(property.offset + property.length, object.offset + object.length - 1);
    // The entry was the only one: the object is left empty, as `{}`, unless comments are kept in it.
    if (/^[\s,]*$/.test(inside)) return applied(text, { offset: object.offset, length: object.length, content: "{}" });
    const comma = /^\s*,/.exec(text.slice(property.offset + property.length))?.[0].length ?? 0;
    // The line break and indentation insertion() put before it go too, when nothing else is there.
    const from = /^\s*$/.test(text.slice(object.offset + 1, property.offset)) ? object.offset + 1 : property.offset;
    return applied(text, { offset: from, length: property.offset + property.length + comma - from, content: "" });
  }
  return applied(text, cut(doc, property));
}

/** Whether `text` is what putEntry writes for a file that was not there, holding only this entry. */
function isFreshFile(text: string, container: readonly string[], name: string, doc: Doc): boolean {
  const entry = readEntry(text, container, name);
  if (!entry || typeof entry.value !== "object" || entry.value === null) return false;
  let nested: unknown = { [name]: entry.value };
  for (const key of [...container].reverse()) nested = { [key]: nested };
  const style = styleOf(doc.text);
  return doc.text === formatted(nested, "", style) + style.eol;
}

/** The edit that cuts `property` with the separator that joins it to its neighbours. */
function cut(doc: Doc, property: Node): Edit {
  const siblings = property.parent!.children!;
  const index = siblings.indexOf(property);
  const previous = siblings[index - 1];
  const end = property.offset + property.length;
  if (previous) {
    const from = previous.offset + previous.length;
    return { offset: from, length: end - from, content: "" };
  }
  const next = siblings[index + 1]!;
  return { offset: property.offset, length: next.offset - property.offset, content: "" };
}

/** Whether two JSON values are the same (key order counts: it is what the file shows). */
export const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
