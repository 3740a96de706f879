// Loaded with --import by the benchmark: on exit, writes the process's peak RSS (KiB) to the file
// named by SUBS_BENCH_RSS_FILE, so memory is measured in the CLI's own process.
import { writeFileSync } from "node:fs";

const file = process.env.SUBS_BENCH_RSS_FILE;
if (file) process.on("exit", () => writeFileSync(file, String(process.resourceUsage().maxRSS)));
