import { COMMANDS, GROUPS } from './commands/index.js';

const GLOBAL_FLAGS = ['--json', '--help', '--version'];

/**
 * A completion script for bash or zsh: the commands, each command's words, and its
 * options. `source <(dunwall completion bash)`, or for zsh `source <(dunwall completion zsh)`.
 */
export function completionScript(shell: 'bash' | 'zsh'): string {
  const singles = COMMANDS.filter((c) => !c.name.includes(' ')).map((c) => c.name);
  const top = [...GROUPS, ...singles, 'help', 'completion'].join(' ');
  const cases = GROUPS.map((group) => {
    const subs = COMMANDS.filter((c) => c.name.startsWith(`${group} `));
    const words = subs.map((c) => c.name.split(' ')[1] ?? '').join(' ');
    const flagCases = subs
      .map(
        (c) =>
          `        ${c.name.split(' ')[1] ?? ''}) opts="${[...Object.keys(c.options).map((o) => `--${o}`), ...GLOBAL_FLAGS].join(' ')}" ;;`,
      )
      .join('\n');
    return `    ${group})\n      if [ "$COMP_CWORD" -eq 2 ]; then opts="${words}"; else\n      case "\${COMP_WORDS[2]}" in\n${flagCases}\n        *) opts="${GLOBAL_FLAGS.join(' ')}" ;;\n      esac; fi ;;`;
  }).join('\n');
  const singleCases = COMMANDS.filter((c) => !c.name.includes(' '))
    .map(
      (c) => `    ${c.name}) opts="${[...Object.keys(c.options).map((o) => `--${o}`), ...GLOBAL_FLAGS].join(' ')}" ;;`,
    )
    .join('\n');
  const bash = `# dunwall completion for bash: source <(dunwall completion bash)
_dunwall() {
  local cur opts
  cur="\${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    opts="${top} ${GLOBAL_FLAGS.join(' ')}"
  else
    case "\${COMP_WORDS[1]}" in
${cases}
${singleCases}
    help) opts="${GROUPS.join(' ')}" ;;
    completion) opts="bash zsh" ;;
    *) opts="${GLOBAL_FLAGS.join(' ')}" ;;
    esac
  fi
  COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
}
complete -F _dunwall dunwall
`;
  if (shell === 'bash') return bash;
  // zsh runs the bash completion through its compatibility layer.
  return `# dunwall completion for zsh: source <(dunwall completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bash}`;
}
