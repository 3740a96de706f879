// libpq's password file (https://www.postgresql.org/docs/current/libpq-pgpass.html), read by subs
// itself rather than by the pg client (which would look in process.env and ~/.pgpass on its own):
// lines of `hostname:port:database:username:password`, `#` lines comments, each of the first four
// fields a literal or `*`, `:` and `\` escaped with `\`; the first line that matches gives the
// password.

export type PgTarget = { host: string; port: string; database: string; user: string };

/** A line's fields, split at unescaped `:` and unescaped. */
function fields(line: string): string[] {
  const out: string[] = [];
  let field = "";
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "\\" && i + 1 < line.length) field += line[++i];
    else if (c === ":") {
      out.push(field);
      field = "";
    } else field += c;
  }
  out.push(field);
  return out;
}

/** The password of the first line matching `target`; `undefined` when none does. */
export function pgpassPassword(text: string, target: PgTarget): string | undefined {
  const wanted = [target.host, target.port, target.database, target.user];
  for (const line of text.split(/\r?\n/)) {
    if (line.startsWith("#") || !line.trim()) continue;
    const parts = fields(line);
    if (parts.length < 5) continue;
    if (wanted.every((value, i) => parts[i] === "*" || parts[i] === value)) return parts[4];
  }
  return undefined;
}
