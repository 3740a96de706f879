import { Command } from "commander"; const p = new Command("x"); p.command("a").option("--b"); console.log(typeof p);
