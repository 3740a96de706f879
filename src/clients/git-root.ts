// The repository a directory belongs to, found the way Claude Code finds it: it keys a project's
// local-scope servers and its turned-off lists in ~/.claude.json by this directory. The root is the
// nearest ancestor holding `.git` (a directory, or a file `gitdir: <path>`); a linked worktree's
// `.git` file leads to `<common dir>/worktrees/<name>`, whose `commondir` names the main
// repository's `.git` and whose `gitdir` points back at the worktree (git-worktree(1), "DETAILS";
// gitrepository-layout(5)): its project is the main working tree's. Only files are read, no git is
// run; each is small and read bounded (src/clients/read.ts), so a hostile `.git` (a FIFO, a huge
// file) costs nothing.
import { realpathSync, statSync } from "node:fs";
import path from "node:path";
import { readBounded } from "./read.ts";

/** The most read of `.git`, `commondir` and `gitdir`: each holds one path. */
const POINTER_MAX_BYTES = 64 * 1024;

/** The nearest directory at or above `dir` that holds `.git`, or undefined outside a repository. */
export function gitRoot(dir: string): string | undefined {
  for (let current = path.resolve(dir); ; ) {
    if (isDirOrFile(path.join(current, ".git"))) return current;
    const parent = path.dirname(current);
    if (parent === current) return undefined;
    current = parent;
  }
}

/**
 * The working tree `root` stands for: itself, or, when it is a linked worktree whose metadata
 * points back at it, the main repository's root (for a bare main repository, its directory).
 * Anything that does not check out (a submodule's `.git` file, a dangling link) is `root` itself.
 */
export function canonicalGitRoot(root: string): string {
  const pointer = readPointer(path.join(root, ".git"));
  if (pointer === undefined || !pointer.startsWith("gitdir:")) return root;
  const gitDir = path.resolve(root, pointer.slice("gitdir:".length).trim());
  const common = readPointer(path.join(gitDir, "commondir"));
  if (common === undefined) return root;
  const commonDir = path.resolve(gitDir, common);
  if (path.dirname(gitDir) !== path.join(commonDir, "worktrees")) return root;
  const back = readPointer(path.join(gitDir, "gitdir"));
  if (back === undefined || realPath(path.resolve(gitDir, back)) !== path.join(realPath(root), ".git")) return root;
  if (path.basename(commonDir) !== ".git") return isDirOrFile(path.join(commonDir, ".git")) ? root : commonDir;
  return path.dirname(commonDir);
}

function readPointer(file: string): string | undefined {
  const text = readBounded(file, POINTER_MAX_BYTES);
  return typeof text === "string" ? text.trim() : undefined;
}

function isDirOrFile(file: string): boolean {
  try {
    const stats = statSync(file);
    return stats.isDirectory() || stats.isFile();
  } catch {
    return false;
  }
}

export function realPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}
