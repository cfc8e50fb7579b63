# Sourced by bench-overlaps.sh and bench-overlaps-ab.sh: `overlaps_repo DIR` makes the repository
# they measure, DIR/app: 2,500 files (and src/own.rs, src/hot.rs, src/warm.rs) committed on main,
# 7 linked worktrees DIR/wt1..wt7 with 250 changed files each (125 committed on their branch, 125
# uncommitted), 250 files of the main worktree changed uncommitted; src/hot.rs changed in wt1 and
# wt2, src/warm.rs in wt1. Needs git's author variables set.
overlaps_repo() {
  local w=$1 repo=$1/app n lo i
  mkdir -p "$repo/src"
  for i in $(seq 1 2500); do echo "fn f$i() {}" >"$repo/src/f$i.rs"; done
  echo 'fn own() {}' >"$repo/src/own.rs"; echo 'fn hot() {}' >"$repo/src/hot.rs"; echo 'fn warm() {}' >"$repo/src/warm.rs"
  git -C "$repo" init -q -b main; git -C "$repo" add .; git -C "$repo" commit -qm init
  for n in $(seq 1 7); do
    git -C "$repo" worktree add -q -b "b$n" "$w/wt$n"
    lo=$(((n - 1) * 250 + 1))
    for i in $(seq "$lo" $((lo + 124))); do echo "// wt$n" >>"$w/wt$n/src/f$i.rs"; done
    if [ "$n" -le 2 ]; then echo "// wt$n" >>"$w/wt$n/src/hot.rs"; fi
    if [ "$n" -eq 1 ]; then echo "// wt$n" >>"$w/wt$n/src/warm.rs"; fi
    git -C "$w/wt$n" commit -qam "wt$n"
    for i in $(seq $((lo + 125)) $((lo + 249))); do echo "// wt$n dirty" >>"$w/wt$n/src/f$i.rs"; done
  done
  for i in $(seq 1751 2000); do echo "// main dirty" >>"$repo/src/f$i.rs"; done
}
