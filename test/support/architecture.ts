// What test/architecture.test.ts reads of a source tree: every module's imports (static,
// `export … from`, dynamic `import()`, `import type` and `typeof import()`: a type-only import
// leaves nothing at run time but ties the importer to a shape the imported module owns, so it
// counts as any other), its functions' lengths and its comments, from the TypeScript compiler's
// syntax tree; and the layers ARCHITECTURE.md names. Each check takes the tree's root (or its
// modules), so the test can run it on a temporary tree built to break the rule as well as on src/.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** How a module imports another: `import type` stands for every type-only form. */
export type ImportKind = "import" | "import()" | "import type";

export type Module = {
  /** Path relative to the root, with `/`. */
  file: string;
  source: ts.SourceFile;
  /** The root-relative paths of the modules it imports (relative specifiers only). */
  imports: string[];
  /** How it imports each of them (a module imported two ways has both). */
  kinds: Map<string, Set<ImportKind>>;
};

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else if (/\.(ts|mts|cts)$/.test(name) && !name.endsWith(".d.ts")) out.push(full);
  }
  return out;
}

/** Type-only: `import type`, `export type`, or named imports that are each `type`. */
function typeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) return node.isTypeOnly;
  const clause = node.importClause;
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const named = clause.namedBindings;
  return !clause.name && named !== undefined && ts.isNamedImports(named) && named.elements.length > 0 && named.elements.every((e) => e.isTypeOnly);
}

function specifiersOf(source: ts.SourceFile): Array<{ specifier: string; kind: ImportKind }> {
  const found: Array<{ specifier: string; kind: ImportKind }> = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, kind: typeOnly(node) ? "import type" : "import" });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [first] = node.arguments;
      if (first && ts.isStringLiteralLike(first)) found.push({ specifier: first.text, kind: "import()" });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, kind: "import type" });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      found.push({ specifier: node.moduleReference.expression.text, kind: node.isTypeOnly ? "import type" : "import" });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every module under `root`, parsed, with the modules it imports resolved to root-relative paths. */
export function readModules(root: string): Module[] {
  return filesUnder(root).map((full) => {
    const text = readFileSync(full, "utf8");
    const source = ts.createSourceFile(full, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const kinds = new Map<string, Set<ImportKind>>();
    for (const { specifier, kind } of specifiersOf(source)) {
      if (!specifier.startsWith(".")) continue;
      const target = path.relative(root, path.resolve(path.dirname(full), specifier)).split(path.sep).join("/");
      kinds.set(target, (kinds.get(target) ?? new Set()).add(kind));
    }
    return { file: path.relative(root, full).split(path.sep).join("/"), source, imports: [...kinds.keys()], kinds };
  });
}

/** Every import circle among the modules, each as the path that closes it (`a.ts → b.ts → a.ts`). */
export function importCircles(modules: ReadonlyArray<Pick<Module, "file" | "imports">>): string[] {
  const graph = new Map(modules.map((m) => [m.file, m.imports.filter((i) => i !== m.file)]));
  // Tarjan's strongly connected components: every component of more than one module holds a circle.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  // One concrete circle per component: the shortest way back to its first module.
  return components.map((component) => {
    const inside = new Set(component);
    const start = component[0]!;
    const before = new Map<string, string>();
    const queue = [start];
    for (let at = 0; at < queue.length; at++) {
      const v = queue[at]!;
      for (const w of graph.get(v) ?? []) {
        if (!inside.has(w)) continue;
        if (w === start) {
          const route = [start];
          for (let u: string | undefined = v; u !== undefined && u !== start; u = before.get(u)) route.splice(1, 0, u);
          return [...route, start].join(" → ");
        }
        if (!before.has(w)) {
          before.set(w, v);
          queue.push(w);
        }
      }
    }
    return component.join(", ");
  });
}

/** A layer of ARCHITECTURE.md: its name and the parts of src/ it holds (`main.ts`, `commands/`). */
export type Layer = { name: string; parts: string[] };

/**
 * The layers ARCHITECTURE.md's "Layers" section lists, top first: each an item
 * `N. **Name** (`part`, `part/`, …): …` whose parenthesis names, relative to src/, every top-level
 * file and folder the layer holds. The document is the rule: the test reads it rather than a copy.
 */
export function layersIn(markdown: string): Layer[] {
  const lines = markdown.split("\n");
  const start = lines.indexOf("## Layers");
  const end = lines.findIndex((line, i) => i > start && line.startsWith("## "));
  const section = start < 0 ? "" : lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
  return [...section.matchAll(/^\d+\. \*\*([^*]+)\*\* \(([^)]*)\):/gm)].map((m) => ({
    name: m[1]!,
    parts: [...m[2]!.matchAll(/`([^`]+)`/g)].map((p) => p[1]!),
  }));
}

/** The part of src/ a root-relative file is in: its top-level folder (`commands/`), or itself (`main.ts`). */
export const partOf = (file: string): string => (file.includes("/") ? `${file.slice(0, file.indexOf("/"))}/` : file);

/**
 * Each top-level file or folder under `root` that no layer names (or two do), and each name of a
 * layer that is not there: a new part of src/ fails until ARCHITECTURE.md says where it sits.
 */
export function unplacedParts(root: string, layers: readonly Layer[]): string[] {
  const parts = readdirSync(root)
    .filter((name) => statSync(path.join(root, name)).isDirectory() || /\.(ts|mts|cts)$/.test(name))
    .map((name) => (statSync(path.join(root, name)).isDirectory() ? `${name}/` : name))
    .sort();
  const problems: string[] = [];
  for (const part of parts) {
    const holders = layers.filter((l) => l.parts.includes(part)).map((l) => l.name);
    if (holders.length === 0) problems.push(`src/${part} is in no layer: name it in the list of its layer in ARCHITECTURE.md, "Layers"`);
    else if (holders.length > 1) problems.push(`src/${part} is named by ${holders.length} layers (${holders.join(", ")}) in ARCHITECTURE.md, "Layers": a part sits in one`);
  }
  for (const layer of layers) for (const part of layer.parts) if (!parts.includes(part)) problems.push(`ARCHITECTURE.md, "Layers", names src/${part} in ${layer.name}: there is no such file or folder`);
  return problems;
}

const how = (m: Module, target: string) => [...(m.kinds.get(target) ?? [])].join(", ");

/**
 * Each import that points up the layers ("nothing imports a layer above it"), as `file imports
 * target (how): the rule`. An import that leaves the root (package.json) or reaches a part no layer
 * holds is not judged here: unplacedParts reports the part.
 */
export function importsUpward(modules: readonly Module[], layers: readonly Layer[]): string[] {
  const layerOf = (file: string) => layers.findIndex((l) => l.parts.includes(partOf(file)));
  return modules.flatMap((m) => {
    const from = layerOf(m.file);
    return m.imports
      .filter((target) => !target.startsWith("../") && from >= 0 && layerOf(target) >= 0 && layerOf(target) < from)
      .map((target) => {
        const to = layerOf(target);
        return `${m.file} imports ${target} (${how(m, target)}): ${layers[from]!.name} (layer ${from + 1}) may not import ${layers[to]!.name} (layer ${to + 1}), a layer above it`;
      });
  });
}

/**
 * Circles between parts of src/ (a folder imports another that imports it back, through any of
 * their modules) that are no circle between modules: each folder stays one piece that can be read
 * with only what it imports.
 */
export function partCircles(modules: readonly Module[]): string[] {
  const imports = new Map<string, Set<string>>();
  for (const m of modules) {
    const from = partOf(m.file);
    const into = imports.get(from) ?? imports.set(from, new Set()).get(from)!;
    for (const target of m.imports) if (!target.startsWith("../") && partOf(target) !== from) into.add(partOf(target));
  }
  return importCircles([...imports].map(([file, targets]) => ({ file, imports: [...targets] })));
}

/**
 * Each import from one command's code into another's. A command's folder
 * (src/commands/<group>/<command>/) may import its own files, the shared files of the folders
 * around it (src/commands/options.ts, a group's own files beside its command.ts), and a group's
 * command.ts the command.ts of each of its commands (the tree of declarations).
 */
export function importsBetweenCommands(modules: readonly Module[]): string[] {
  const folder = (file: string) => path.posix.dirname(file);
  return modules.flatMap((m) => {
    if (!m.file.startsWith("commands/")) return [];
    const own = folder(m.file);
    return m.imports
      .filter((target) => target.startsWith("commands/"))
      .filter((target) => {
        const theirs = folder(target);
        if (own === theirs || own.startsWith(`${theirs}/`)) return false;
        const declares = path.posix.basename(m.file) === "command.ts" && path.posix.basename(target) === "command.ts" && folder(theirs) === own;
        return !declares;
      })
      .map((target) => `${m.file} imports ${target} (${how(m, target)}): one command's folder may not import another's; what two commands share goes in a file of a folder around both (src/commands/, or their group's folder)`);
  });
}

/** "local" or "remote" as a word of a name (`list-remote.ts`, `remote/`, `local-login`). */
const PLACE_WORD = /(^|[-_.])(local|remote)([-_.]|$)/i;

/**
 * Each file or folder under `root`/commands/, at any depth, named for where credentials live
 * (`mcp/list-remote/`, `mcp/login/remote.ts`): a command is written once against the Backend, and
 * local and remote differ behind it (src/backend/), never in twin commands or twin files.
 */
export function placeTwins(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(path.join(root, dir)).sort()) {
      const relative = `${dir}/${name}`;
      const isDir = statSync(path.join(root, relative)).isDirectory();
      if (PLACE_WORD.test(isDir ? name : name.replace(/\.(ts|mts|cts)$/, ""))) {
        found.push(`${relative}${isDir ? "/" : ""}: a command's code named for where credentials live; write the command once against Backend (src/backend/types.ts), local and remote differ behind it`);
      }
      if (isDir) walk(relative);
    }
  };
  walk("commands");
  return found;
}

const lineOf = (source: ts.SourceFile, pos: number) => source.getLineAndCharacterOfPosition(pos).line + 1;

/** Each function (declaration, expression, arrow, method, accessor, constructor) longer than `max` lines. */
export function longFunctions(modules: readonly Module[], max: number): string[] {
  const long: string[] = [];
  for (const { file, source } of modules) {
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && "body" in node && node.body) {
        const lines = lineOf(source, node.end) - lineOf(source, node.getStart(source)) + 1;
        if (lines > max) {
          const name = node.name && ts.isIdentifier(node.name) ? node.name.text : ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name) ? node.parent.name.text : "(anonymous)";
          long.push(`${file}:${lineOf(source, node.getStart(source))} ${name}: ${lines} lines`);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return long;
}

/** Every comment of the module (line and block, JSDoc included), once each, with its line. */
export function commentsOf(source: ts.SourceFile): Array<{ line: number; text: string }> {
  const text = source.getFullText();
  const seen = new Map<number, string>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) seen.set(r.pos, text.slice(r.pos, r.end));
  };
  // Every node and token, its comments before and after: a comment after a comma or before a
  // closing brace belongs to a token, which the tree's children do not list. JSDoc is itself a
  // comment: its parts are not walked, as their positions fall inside it.
  const visit = (node: ts.Node): void => {
    add(ts.getLeadingCommentRanges(text, node.getFullStart()));
    add(ts.getTrailingCommentRanges(text, node.getEnd()));
    for (const child of node.getChildren(source)) if (!ts.isJSDoc(child)) visit(child);
  };
  visit(source);
  return [...seen].sort(([a], [b]) => a - b).map(([pos, comment]) => ({ line: lineOf(source, pos), text: comment }));
}

/** A ticket's number in prose: "issue 16", "issue #16", "Issue 14, item 1", "issues 3 and 5". */
export const ISSUE_NUMBER = /\bissues?\s*#?\d+/i;

/** `file:line: comment` for each comment naming an issue number. */
export function issueNumbersInComments(modules: readonly Module[]): string[] {
  return modules.flatMap(({ file, source }) =>
    commentsOf(source)
      .filter((c) => ISSUE_NUMBER.test(c.text))
      .map((c) => `${file}:${c.line}: ${ISSUE_NUMBER.exec(c.text)![0]}`),
  );
}
