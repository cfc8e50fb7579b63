//! `conductor shell-init bash|zsh|fish`: shell functions that wrap `conductor start` / `done`
//! so the instance id lands in (and leaves) `CONDUCTOR_INSTANCE_ID` of the current shell, and a
//! `conductor_prompt` segment. The same scripts are checked in under `shell/` (a test keeps
//! them equal to this output).

use crate::output::Output;
use conductor::error::Result;

/// Shells `shell-init` writes functions for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InitShell {
    /// GNU Bash
    Bash,
    /// Z shell
    Zsh,
    /// fish
    Fish,
}

/// Print the shell integration.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Load it from your shell's startup file:\n  bash: eval \"$(conductor shell-init bash)\"   \
(in ~/.bashrc)\n  zsh:  eval \"$(conductor shell-init zsh)\"    (in ~/.zshrc)\n  fish: conductor shell-init fish | source   \
(in ~/.config/fish/config.fish)\n\nThen `conductor start ...` sets CONDUCTOR_INSTANCE_ID in the shell (with --worktree it also moves the \
shell into the new worktree) and `conductor done` unsets it. For the prompt segment add $(conductor_prompt) to PS1 (zsh: setopt PROMPT_SUBST)."
)]
pub struct ShellInitArgs {
    /// The shell to print functions for.
    #[arg(value_enum)]
    pub shell: InitShell,
}

const POSIX_BODY: &str = r#"# `conductor start ...` exports CONDUCTOR_INSTANCE_ID in this shell (and records this shell's
# pid, so `conductor cleanup` reaps the instance once the shell is gone); `conductor done` unsets it.
# `conductor start ... --worktree [NAME]` also moves this shell into the new worktree.
conductor() {
  case "$1" in
    start)
      local __conductor_out __conductor_rc __conductor_id __conductor_dir
      __conductor_out=$(CONDUCTOR_OWNER_PID=$$ command conductor "$@")
      __conductor_rc=$?
      [ -n "$__conductor_out" ] && printf '%s\n' "$__conductor_out"
      __conductor_id=$(printf '%s\n' "$__conductor_out" | sed -n 's/^Registered as \([a-z]\{3\}-[0-9a-f]\{6\}\).*/\1/p')
      if [ "$__conductor_rc" -eq 0 ] && [ -n "$__conductor_id" ]; then
        export CONDUCTOR_INSTANCE_ID="$__conductor_id"
      fi
      # `Working in the new worktree DIR (branch B): cd DIR` (a branch name has no space).
      __conductor_dir=$(printf '%s\n' "$__conductor_out" | sed -n 's/^Working in the new worktree \(.*\) (branch [^ ]*): cd .*$/\1/p' | head -n 1)
      if [ "$__conductor_rc" -eq 0 ] && [ -n "$__conductor_dir" ] && [ -d "$__conductor_dir" ]; then
        builtin cd -- "$__conductor_dir" && printf 'conductor: this shell is now in the worktree %s\n' "$__conductor_dir"
      fi
      return "$__conductor_rc"
      ;;
    done)
      command conductor "$@" || return
      # Remembered so a repeated `done` names the session it already finished.
      [ -n "$CONDUCTOR_INSTANCE_ID" ] && export CONDUCTOR_FINISHED_ID="$CONDUCTOR_INSTANCE_ID"
      unset CONDUCTOR_INSTANCE_ID
      ;;
    *)
      command conductor "$@"
      ;;
  esac
}

# Prints `[itm-a1b2c3 · 3 claimed]` while this shell has an instance (reads state without locking).
conductor_prompt() {
  [ -n "$CONDUCTOR_INSTANCE_ID" ] || return 0
  command conductor prompt 2>/dev/null
}
"#;

const FISH_BODY: &str = r#"# `conductor start ...` exports CONDUCTOR_INSTANCE_ID in this shell (and records this shell's
# pid, so `conductor cleanup` reaps the instance once the shell is gone); `conductor done` unsets it.
# `conductor start ... --worktree [NAME]` also moves this shell into the new worktree.
function conductor --description 'conductor, keeping CONDUCTOR_INSTANCE_ID in this shell'
    switch "$argv[1]"
        case start
            set -lx CONDUCTOR_OWNER_PID $fish_pid
            set -l out (command conductor $argv)
            set -l rc $status
            test -n "$out"; and printf '%s\n' $out
            set -l id (printf '%s\n' $out | sed -n 's/^Registered as \([a-z]\{3\}-[0-9a-f]\{6\}\).*/\1/p')
            if test $rc -eq 0 -a -n "$id"
                set -gx CONDUCTOR_INSTANCE_ID $id
            end
            # `Working in the new worktree DIR (branch B): cd DIR` (a branch name has no space).
            set -l dir (printf '%s\n' $out | sed -n 's/^Working in the new worktree \(.*\) (branch [^ ]*): cd .*$/\1/p' | head -n 1)
            if test $rc -eq 0 -a -n "$dir"; and test -d "$dir"
                cd $dir; and printf 'conductor: this shell is now in the worktree %s\n' $dir
            end
            return $rc
        case done
            command conductor $argv; or return
            # Remembered so a repeated `done` names the session it already finished.
            test -n "$CONDUCTOR_INSTANCE_ID"; and set -gx CONDUCTOR_FINISHED_ID $CONDUCTOR_INSTANCE_ID
            set -e CONDUCTOR_INSTANCE_ID
        case '*'
            command conductor $argv
    end
end

# Prints `[itm-a1b2c3 · 3 claimed]` while this shell has an instance (reads state without locking).
function conductor_prompt
    test -n "$CONDUCTOR_INSTANCE_ID"; or return 0
    command conductor prompt 2>/dev/null
end
"#;

/// The script for a shell, exactly as printed (and as checked in under `shell/`).
pub fn script(shell: InitShell) -> String {
    let (name, load, body) = match shell {
        InitShell::Bash => ("bash", "eval \"$(conductor shell-init bash)\"", POSIX_BODY),
        InitShell::Zsh => ("zsh", "eval \"$(conductor shell-init zsh)\"", POSIX_BODY),
        InitShell::Fish => ("fish", "conductor shell-init fish | source", FISH_BODY),
    };
    format!(
        "# conductor shell integration for {name}; generated by `conductor shell-init {name}`.\n# Load it with: {load}\n{body}"
    )
}

/// Run `shell-init`.
pub fn run(args: ShellInitArgs, _out: &Output) -> Result<u8> {
    super::completions::write_stdout(script(args.shell).as_bytes())
}
