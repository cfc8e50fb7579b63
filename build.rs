//! Release builds of the `conductor` binary on Linux are linked as ordinary, not
//! position-independent, executables (`-no-pie`): every conductor command is a short process,
//! and a position-independent one starts by relocating about 25,000 pointers of its read-only
//! data (`R_X86_64_RELATIVE`), which also dirties those pages. Measured with
//! `shell/bench-startup.sh` (see docs/internals.md, "Start-up"). The price: the binary's own code
//! and data load at a fixed address (its libraries, heap and stack are still randomized).
//! `CONDUCTOR_PIE=1 cargo build --release` keeps the default, for comparison. Debug and test
//! builds are untouched.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CONDUCTOR_PIE");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let keep_pie = std::env::var_os("CONDUCTOR_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if release && linux && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
