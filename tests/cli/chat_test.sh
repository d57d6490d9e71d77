#!/usr/bin/env bash
# `megadecode chat` on the tiny fixture model, scripted through a pipe (multi-turn, slash
# commands, reasoning markers, reuse of the sequence, reproducibility, errors that do not end the
# chat) and, when tmux is installed, in a real terminal (Ctrl-C stops a reply, the chat goes on).
# Usage: chat_test.sh BINARY FIXTURES_DIR
set -u
bin="$1"; fixtures="$2"
model="$fixtures/tiny-qwen38"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# chat NAME INPUT ARGS...: runs the chat with INPUT (printf format) on stdin; output in
# $work/NAME.out and $work/NAME.err, exit code in $work/NAME.rc.
chat() {
  local name="$1" input="$2"; shift 2
  # shellcheck disable=SC2059
  printf "$input" | "$bin" chat --model "$model" "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
}
# expect_rc NAME WANT; expect_grep NAME STREAM REGEX [COUNT]
expect_rc() { [ "$(cat "$work/$1.rc")" -eq "$2" ]; expect "$1-exit" $? "exit $(cat "$work/$1.rc"), expected $2"; }
expect_grep() {
  local count; count=$(grep -Ec -- "$3" "$work/$1.$2")
  if [ -n "${4:-}" ]; then [ "$count" -eq "$4" ]; else [ "$count" -gt 0 ]; fi
  expect "$1-$2" $? "$count lines of $1.$2 match /$3/ (wanted ${4:-some}): $(head -c 600 "$work/$1.$2")"
}
# reply NAME K: the K-th reply of a thinking-mode chat (from its [thinking] line to the next).
reply() { awk -v k="$2" '/^\[thinking\]$/ { n++ } n == k' "$work/$1.out"; }
short=(--max-tokens 6 --ignore-eos)
stats='prompt [0-9]+ tok \([0-9]+ reused\) \| prefill .* \| decode [0-9]+ tok at .* tok/s .*\| finish'

# Two user turns give two replies; stdout is not a terminal, so reasoning is marked with lines.
# The template opens a <think> block, and the random model never closes it.
chat multi 'Hi\nBye\n' "${short[@]}"
expect_rc multi 0
expect_grep multi out '^\[thinking\]$' 2
expect_grep multi out '^\[/thinking\]$' 2
expect_grep multi err '.' 0

# --no-think: the template closes the block itself, so there is nothing to mark.
chat nothink 'Hi\nBye\n' "${short[@]}" --no-think
expect_rc nothink 0
expect_grep nothink out 'thinking\]' 0
[ -s "$work/nothink.out" ]; expect nothink-answers $? "no answer text"

# /stats: the last turn's figures and the context, on stderr. The second turn reuses the whole
# sequence the first left behind when the re-rendered conversation extends what the model saw.
# The random model may emit text the template rewrites (it trims control characters), so a few
# lengths are tried; each is deterministic (greedy), and reuse must show in at least one.
reused=no
for n in 4 5 3 6 2; do
  chat stats 'Hi\n/stats\nBye\n/stats\n' --max-tokens "$n" --ignore-eos --greedy
  first_context=$(grep -Eo '^context [0-9]+' "$work/stats.err" | head -1 | cut -d' ' -f2)
  second_reused=$(grep -Eo '\([0-9]+ reused\)' "$work/stats.err" | sed -n 2p | tr -dc 0-9)
  if [ -n "$first_context" ] && [ "${second_reused:-0}" -gt 0 ] &&
     [ "$second_reused" -eq "$first_context" ]; then reused=yes; break; fi
done
expect_rc stats 0
expect_grep stats err "$stats" 2
expect_grep stats err '^context [0-9]+ / 4096 tokens$' 2
expect_grep stats err '^prompt [0-9]+ tok \(0 reused\)' 1
[ "$reused" = yes ]; expect stats-second-turn-reuses $? "no length made turn 2 reuse turn 1: $(cat "$work/stats.err")"

# /reset: a new conversation; the same question then gets the same (greedy) reply.
chat reset 'Hi\n/reset\n/stats\nHi\n/stats\n' "${short[@]}" --greedy
expect_rc reset 0
expect_grep reset err '^\(new conversation\)$' 1
expect_grep reset err '^context 0 / ' 1
expect_grep reset err '\(0 reused\)' 2
[ -n "$(reply reset 1)" ] && [ "$(reply reset 1)" = "$(reply reset 2)" ]
expect reset-same-reply $? "replies before and after /reset differ: $(cat "$work/reset.out")"

# /system: the message reaches the prompt exactly as --system does; empty /system clears it.
chat system-cmd '/system You are terse.\nHi\n/stats\n/system\nHi\n/stats\n' "${short[@]}" --greedy
chat system-flag 'Hi\n/stats\n' "${short[@]}" --greedy --system 'You are terse.'
chat plain 'Hi\n/stats\n' "${short[@]}" --greedy
expect_rc system-cmd 0
expect_grep system-cmd err '^\(system message set; new conversation\)$' 1
expect_grep system-cmd err '^\(no system message; new conversation\)$' 1
prompt_of() { grep -Eo '^prompt [0-9]+' "$work/$1.err" | sed -n "${2}p"; }
[ "$(prompt_of system-cmd 1)" = "$(prompt_of system-flag 1)" ] &&
  [ "$(prompt_of system-cmd 1)" != "$(prompt_of plain 1)" ] &&
  [ "$(prompt_of system-cmd 2)" = "$(prompt_of plain 1)" ]
expect system-prompt $? "prompt sizes: /system $(prompt_of system-cmd 1), --system $(prompt_of system-flag 1), none $(prompt_of plain 1), cleared $(prompt_of system-cmd 2)"
[ "$(reply system-cmd 1)" = "$(reply system-flag 1)" ] && [ "$(reply system-cmd 2)" = "$(reply plain 1)" ]
expect system-same-reply $? "/system and --system replies differ"

# Unknown commands print the help on stderr; /help prints it on stdout; /exit ends the chat.
chat unknown '/bogus\n/help\n/exit\nHi\n' "${short[@]}"
expect_rc unknown 0
expect_grep unknown err '^unknown command /bogus$' 1
expect_grep unknown err '^Commands:$' 1
expect_grep unknown out '^Commands:$' 1
expect_grep unknown out 'thinking' 0

# End of input (Ctrl-D) ends the chat with status 0, also without a final newline.
chat eof 'Hi' "${short[@]}"
expect_rc eof 0
expect_grep eof out '^\[thinking\]$' 1

# The same seed gives the same conversation; another seed a different one.
for run in a b; do chat "seed-$run" 'Hi\nTell me more\n' --max-tokens 12 --ignore-eos --temperature 1 --seed 7; done
chat seed-c 'Hi\nTell me more\n' --max-tokens 12 --ignore-eos --temperature 1 --seed 8
cmp -s "$work/seed-a.out" "$work/seed-b.out"; expect seed-reproducible $? "same seed, different replies"
! cmp -s "$work/seed-a.out" "$work/seed-c.out"; expect seed-matters $? "different seeds, same replies"

# A turn that does not fit the context is an error message, not the end of the chat.
chat overflow 'Hi\n/help\n' "${short[@]}" --context 40
expect_rc overflow 0
expect_grep overflow err 'context holds 40' 1
expect_grep overflow err '/reset' 1
expect_grep overflow out '^Commands:$' 1

# In a terminal: grey reasoning, Ctrl-C stops a reply and returns to the prompt, the next line
# is answered, Ctrl-D leaves with status 0.
if command -v tmux >/dev/null; then
  socket="mdchat-$$"
  tm() { tmux -L "$socket" "$@"; }
  trap 'tm kill-server 2>/dev/null; rm -rf "$work"' EXIT
  pane() { tm capture-pane -p -J -S -200 -t chat "$@" | grep -v '^$'; }
  # until CONDITION...: polls the shell condition for 20 s at most (sanitizer builds are slow).
  until_ok() {
    for _ in $(seq 200); do "$@" && return 0; sleep 0.1; done
    return 1
  }
  shows() { [ "$(pane | grep -Ec -- "$1")" -ge "${2:-1}" ]; }
  # replying LINE: the pane shows output after the line the user typed.
  replying() { [ "$(pane | sed -n "/^> $1\$/,\$p" | wc -l)" -ge 2 ]; }
  tm new-session -d -s chat -x 200 -y 50 \
    "TERM=xterm-256color '$bin' chat --model '$model' --context 4096 --max-tokens 100000 --ignore-eos --temperature 1 --seed 3; echo \$? >'$work/tmux.rc'; sleep 60"
  until_ok shows '^> '; expect tmux-prompt $? "no prompt: $(pane)"
  tm send-keys -t chat 'Hi' Enter
  until_ok replying Hi; sleep 0.3
  tm send-keys -t chat C-c
  # The terminal echoes ^C itself, possibly on the same line.
  until_ok shows '\[stopped\]$'; expect tmux-ctrl-c-stops $? "no [stopped] after Ctrl-C: $(pane | tail -5)"
  pane -e | grep -q $'\e\\[90m'; expect tmux-grey-reasoning $? "no grey text in the pane"
  tm send-keys -t chat '/reset' Enter 'again' Enter
  until_ok replying again; sleep 0.3
  tm send-keys -t chat C-c
  until_ok shows '\[stopped\]$' 2; expect tmux-next-line-answered $? "second reply not stopped: $(pane | tail -5)"
  tm send-keys -t chat '/stats' Enter
  until_ok shows 'decode [1-9][0-9]* tok .*finish cancelled'
  expect tmux-second-reply-decoded $? "no cancelled reply with tokens: $(pane | tail -5)"
  tm send-keys -t chat C-d
  until_ok test -s "$work/tmux.rc"
  [ "$(cat "$work/tmux.rc" 2>/dev/null)" = 0 ]; expect tmux-ctrl-d-exits-0 $? "status '$(cat "$work/tmux.rc" 2>/dev/null)'"

  # Ctrl-C at the prompt asks before leaving and the chat goes on; Ctrl-C pressed twice during
  # a reply stops it without ending the program; a line typed during a reply is answered next;
  # Ctrl-C twice at the prompt leaves with status 0.
  # On a fresh server: killing the last session ends the server, and a session started while it
  # shuts down fails with "server exited unexpectedly" (seen under load).
  tm kill-server
  socket="mdchat-$$-second"
  rm -f "$work/tmux.rc"
  # The first reply runs until the double Ctrl-C lands and the next turn's prompt holds it, so
  # its length is the tiny model's speed times that wait: once the one-row products got faster,
  # it sometimes filled the 4096 positions (a 4303-token prompt). One thread and short waits
  # keep it to a fraction of the context.
  tm new-session -d -s chat -x 200 -y 50 \
    "TERM=xterm-256color '$bin' chat --model '$model' --threads 1 --context 4096 --max-tokens 100000 --ignore-eos --temperature 1 --seed 3; echo \$? >'$work/tmux.rc'; sleep 60"
  until_ok shows '^> '; expect tmux2-prompt $? "no prompt: $(pane)"
  tm send-keys -t chat 'half a line' C-c
  until_ok shows 'Ctrl-C again or Ctrl-D to leave'; expect tmux2-ctrl-c-at-prompt-asks $? "no question: $(pane | tail -5)"
  tm send-keys -t chat 'Hi' Enter
  until_ok replying Hi; expect tmux2-chat-goes-on $? "no reply after one Ctrl-C at the prompt: $(pane | tail -5)"
  tm send-keys -t chat 'ahead' Enter
  sleep 0.1
  tm send-keys -t chat C-c C-c
  until_ok shows '\[stopped\]$'; expect tmux2-double-ctrl-c-stops-the-reply $? "no [stopped]: $(pane | tail -5)"
  until_ok replying ahead; expect tmux2-typed-ahead-is-answered $? "the line typed during the reply was not answered: $(pane | tail -8)"
  [ ! -s "$work/tmux.rc" ]; expect tmux2-still-running $? "the chat exited ($(cat "$work/tmux.rc"))"
  tm send-keys -t chat C-c
  until_ok shows '\[stopped\]$' 2; expect tmux2-second-reply-stopped $? "$(pane | tail -5)"
  until_ok shows '^> $'
  tm send-keys -t chat C-c
  sleep 0.3
  tm send-keys -t chat C-c
  until_ok test -s "$work/tmux.rc"
  [ "$(cat "$work/tmux.rc" 2>/dev/null)" = 0 ]; expect tmux2-ctrl-c-twice-at-prompt-exits-0 $? "status '$(cat "$work/tmux.rc" 2>/dev/null)': $(pane | tail -5)"
else
  echo "tmux not installed: terminal checks skipped"
fi

report
