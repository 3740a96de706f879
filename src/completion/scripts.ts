// The scripts `subs completion <shell>` prints. Each asks `subs __complete` for candidates, so
// completion follows the installed version and the file in the current directory.

export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

export const completionScripts: Record<Shell, string> = {
  bash: `# subs completion for bash. Install: subs completion bash > ~/.local/share/bash-completion/completions/subs
_subs_complete() {
  local IFS=$'\\n'
  COMPREPLY=($(subs __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _subs_complete subs
`,
  zsh: `#compdef subs
# subs completion for zsh. Install: subs completion zsh > "\${fpath[1]}/_subs"
_subs() {
  local -a candidates
  candidates=("\${(@f)$(subs __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -a candidates
}
compdef _subs subs
`,
  fish: `# subs completion for fish. Install: subs completion fish > ~/.config/fish/completions/subs.fish
complete -c subs -f -a '(subs __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`,
};
