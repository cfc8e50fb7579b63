use crate::common::*;

#[test]
fn start_claim_done_session() {
    let env = TestEnv::new();
    let id = env.start("Fix auth bug", "P1");
    let r = env.run(&["--json", "claim", "--instance", &id, "src/a.rs"]);
    r.code(0);
    assert_eq!(r.json()["claimed"][0], env.abs("src/a.rs"));
    env.run(&["--json", "done", "--instance", &id]).code(0);
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 0);
}
