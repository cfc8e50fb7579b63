# Sourced by the floor benchmarks (from the repository's root, with `tmp` set): builds, with this
# workspace's [profile.release], the two floors a conductor process is compared with:
#   $tmp/floor/target/release/hello            a hello-world Rust binary
#   $tmp/floor/target/release/replace PATH N   replace PATH by N bytes durably (write a temp
#                                              file, fsync, rename, fsync the directory)
mkdir -p "$tmp/floor/src/bin"
{
  printf '[package]\nname = "floor"\nversion = "0.1.0"\nedition = "2024"\n\n'
  sed -n '/^\[profile.release\]/,/^$/p' Cargo.toml
} > "$tmp/floor/Cargo.toml"
echo 'fn main() { println!("hello 0.1.0"); }' > "$tmp/floor/src/bin/hello.rs"
cat > "$tmp/floor/src/bin/replace.rs" <<'RS'
// replace PATH BYTES: replace PATH with BYTES bytes, durably.
use std::io::Write;
fn main() {
    let mut a = std::env::args().skip(1);
    let path = std::path::PathBuf::from(a.next().unwrap());
    let n: usize = a.next().unwrap().parse().unwrap();
    let dir = path.parent().unwrap();
    let tmp = dir.join(format!(".tmp-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(&vec![b'x'; n]).unwrap();
    f.sync_all().unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
}
RS
CARGO_TARGET_DIR="$tmp/floor/target" cargo build --release --quiet --manifest-path "$tmp/floor/Cargo.toml"
