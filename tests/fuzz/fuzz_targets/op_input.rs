//! `conductor op` input: any UTF-8 text must parse into a request or fail with an invalid-input
//! error (exit 2) whose message is one line; never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match conductor::protocol::request::parse(text) {
        Ok(request) => {
            // Whatever parses must also pass the check the subcommands apply.
            conductor::protocol::request::validate(&request)
                .expect("a parsed op input validates as a request");
        }
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            let msg = e.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
        }
    }
});
