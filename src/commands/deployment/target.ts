// What `subs deployment token …` and `subs deployment person …` share: which deployment's tokens
// and people they manage (src/deployment/tokens.ts, tokenPlace): its API at --url or at the
// project's [remote], or its store on its host with --store.
import { Option, type Command } from "commander";
import type { TokenTarget } from "../../deployment/tokens.ts";
import { configOption, type CommandScope } from "../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "./options.ts";

export type TargetFlags = DeploymentFlags & { url?: string; config?: string };

export function targetOptions(command: Command): Command {
  return settings(
    command,
    false,
    "on the deployment's host: its store, the data directory or postgres:// URL `subs deployment serve` runs with (env SUBS_DEPLOYMENT_STORE); one that does not exist is refused",
  )
    .addOption(new Option("--url <url>", "the deployment's URL: manage its tokens over its API, with an admin token in $SUBSTRUCTURE_TOKEN (default: [remote].url of substructure.toml, with its token_env)"))
    .addOption(configOption());
}

export function targetOf(opts: TargetFlags, configOf: CommandScope["configOf"]): TokenTarget {
  return { ...(opts.url !== undefined ? { url: opts.url } : {}), ...configOf(opts), flags: flagsOf(opts) };
}
