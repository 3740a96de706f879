// What test/architecture.test.ts reads of a source tree: every module's imports (static, `export …
// from`, dynamic `import()` and `typeof import()`), its functions' lengths and its comments, from
// the TypeScript compiler's syntax tree. Each check takes the tree's root, so the test can run it
// on a temporary tree built to break the rule as well as on src/.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

export type Module = {
  /** Path relative to the root, with `/`. */
  file: string;
  source: ts.SourceFile;
  /** The root-relative paths of the modules it imports (relative specifiers only). */
  imports: string[];
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

function specifiersOf(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [first] = node.arguments;
      if (first && ts.isStringLiteralLike(first)) found.push(first.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      found.push(node.moduleReference.expression.text);
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
    const imports = specifiersOf(source)
      .filter((s) => s.startsWith("."))
      .map((s) => path.relative(root, path.resolve(path.dirname(full), s)).split(path.sep).join("/"));
    return { file: path.relative(root, full).split(path.sep).join("/"), source, imports: [...new Set(imports)] };
  });
}

/** Every import circle among the modules, each as the path that closes it (`a.ts → b.ts → a.ts`). */
export function importCircles(modules: readonly Module[]): string[] {
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

/** `file imports target` for each import from a module under one of `from` into one under `into`. */
export function importsAcross(modules: readonly Module[], from: readonly string[], into: readonly string[]): string[] {
  const under = (file: string, dirs: readonly string[]) => dirs.some((d) => file.startsWith(`${d}/`));
  return modules.flatMap((m) => (under(m.file, from) ? m.imports.filter((i) => under(i, into)).map((i) => `${m.file} imports ${i}`) : []));
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
