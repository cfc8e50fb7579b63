//! Nobody gets in who doesn't belong (issue 36, section 1): the real binary against a real
//! three-member etcd with client and peer TLS, `--client-cert-auth` and authentication enabled
//! (certificates made by `openssl` for the test, see [`crate::etcd::Pki`]). Without the CA,
//! without credentials, with a wrong password or as a user whose role covers another prefix,
//! a command exits 11 with one line (and a hint) and nothing under the prefix changes; no
//! password ever shows in an output, a file of the home or `ps`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Run, bin};
use crate::etcd::{Cluster, Host, Pki, free_port, hosts};

/// Run `args` on `h` with its variables changed: `set` added or replaced, `unset` removed.
fn run_with(h: &Host, args: &[&str], set: &[(&str, String)], unset: &[&str]) -> Run {
    let mut c = h.cmd(args);
    for k in unset {
        c.env_remove(k);
    }
    for (k, v) in set {
        c.env(k, v);
    }
    let o = c.output().expect("run conductor");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A refusal: exit `code`, the `reason`, and on stderr exactly one `error:` line and one `hint:`.
#[track_caller]
fn refused_with_reason(r: &Run, code: i32, reason: &str) -> String {
    assert_eq!(r.code, code, "{r:#?}");
    assert_eq!(r.json()["reason"], reason, "{r:#?}");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one error line and one hint: {r:#?}");
    assert!(lines[0].starts_with("error: "), "{r:#?}");
    assert!(lines[1].starts_with("hint: "), "{r:#?}");
    lines[0].to_string()
}

/// Every file under `dir`, read as text.
fn files_text(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&files_text(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.push_str(&String::from_utf8_lossy(&b));
        }
    }
    out
}

#[test]
fn a_secure_cluster_lets_in_only_who_belongs() {
    let cluster = Cluster::secure(3);
    let pki = cluster.pki.as_ref().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut team = hosts(root.path(), &cluster.url(), 1).remove(0);
    team.env = cluster.env_for("team");
    let mut outputs = String::new();
    let mut keep = |r: Run| {
        outputs.push_str(&r.stdout);
        outputs.push_str(&r.stderr);
        r
    };

    // The team's user reads and writes its prefix over TLS.
    let id = team.start("secure work");
    keep(team.run(&["--json", "claim", "src/a.rs", "--instance", &id])).code(0);
    let doctor = keep(team.run(&["--json", "doctor"]));
    doctor.code(0);
    let security = &doctor.json()["backend"]["security"];
    assert_eq!(security["tls"], true, "{doctor:#?}");
    assert_eq!(security["user"], "team", "{doctor:#?}");
    assert_eq!(security["auth_enabled"], true, "{doctor:#?}");
    assert!(
        security["verified_with"]
            .as_str()
            .is_some_and(|v| v.contains("ca.pem")),
        "{doctor:#?}"
    );
    // etcd 3.4 lets a user read its own user record and roles.
    let prefix = cluster.url().rsplit_once('/').unwrap().1.to_string();
    assert_eq!(
        security["roles"],
        serde_json::json!([{"role": "team", "permissions": [format!("READWRITE /{prefix}/*")]}]),
        "{doctor:#?}"
    );
    let text = keep(team.run(&["doctor"]));
    assert!(
        text.stdout.contains("TLS on")
            && text.stdout.contains("user team")
            && text.stdout.contains("role team: READWRITE"),
        "{text:#?}"
    );
    let before = cluster.dump();
    assert!(!before.is_empty());

    let tls = pki.tls_env("anon");
    let ca = tls[0].clone();
    let pw = |user: &str| ("CONDUCTOR_ETCD_PASSWORD", pki.password(user));

    // Without the CA (Mozilla's roots do not know the test's CA) or with another CA: the
    // server cannot be verified.
    for (set, unset) in [
        (vec![], vec!["CONDUCTOR_ETCD_CACERT"]),
        (
            vec![(
                "CONDUCTOR_ETCD_CACERT",
                pki.path("rogue-ca.pem").display().to_string(),
            )],
            vec![],
        ),
    ] {
        for args in [
            &["--json", "claim", "src/b.rs", "--instance", &id][..],
            &["--json", "status"],
        ] {
            let r = keep(run_with(&team, args, &set, &unset));
            let line = refused_with_reason(&r, 11, "store_untrusted");
            assert!(line.contains("not signed by a CA we trust"), "{r:#?}");
        }
    }
    // Without a client certificate: the members refuse it after the handshake (an alert, or
    // just a hang-up, which might have been anything: still exit 11, and the line says it).
    for args in [
        &["--json", "status"][..],
        &["--json", "claim", "src/b.rs", "--instance", &id],
    ] {
        let r = keep(run_with(
            &team,
            args,
            &[],
            &["CONDUCTOR_ETCD_CERT", "CONDUCTOR_ETCD_KEY"],
        ));
        assert_eq!(r.code, 11, "{r:#?}");
        assert!(
            r.stderr
                .lines()
                .next()
                .unwrap()
                .contains("client certificate"),
            "{r:#?}"
        );
        assert_eq!(r.stderr.lines().count(), 2, "{r:#?}");
    }
    // Without a user: etcd knows nobody.
    let r = keep(run_with(
        &team,
        &["--json", "claim", "src/b.rs", "--instance", &id],
        &[],
        &["CONDUCTOR_ETCD_USER"],
    ));
    refused_with_reason(&r, 11, "store_unauthorized");
    // A wrong password (given in the environment, which wins over the file).
    let wrong = format!("{}-wrong", pki.password("team"));
    let r = keep(run_with(
        &team,
        &["--json", "claim", "src/b.rs", "--instance", &id],
        &[("CONDUCTOR_ETCD_PASSWORD", wrong.clone())],
        &[],
    ));
    let line = refused_with_reason(&r, 11, "store_unauthorized");
    assert!(line.contains("wrong user name or password"), "{r:#?}");
    assert!(!r.stdout.contains(&wrong) && !r.stderr.contains(&wrong));
    // A user whose role covers another prefix: neither reads nor writes the team's.
    for args in [
        &["--json", "claim", "src/b.rs", "--instance", &id][..],
        &["--json", "status"],
    ] {
        let r = keep(run_with(
            &team,
            args,
            &[
                ("CONDUCTOR_ETCD_USER", "other".into()),
                (
                    "CONDUCTOR_ETCD_PASSWORD_FILE",
                    pki.password_file("other").display().to_string(),
                ),
            ],
            &[],
        ));
        let line = refused_with_reason(&r, 11, "store_unauthorized");
        assert!(line.contains("permission denied"), "{r:#?}");
    }
    // ... while it may use its own prefix.
    let other_url = format!(
        "{}/{}",
        cluster.url().rsplit_once('/').unwrap().0,
        cluster.other_prefix().trim_matches('/')
    );
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[
            ("CONDUCTOR_STORE", other_url),
            ("CONDUCTOR_ETCD_USER", "other".into()),
            pw("other"),
        ],
        &[],
    ));
    r.code(0);
    // A client certificate with a common name: etcd's gateway refuses it, said plainly.
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[
            (
                "CONDUCTOR_ETCD_CERT",
                pki.path("team.pem").display().to_string(),
            ),
            (
                "CONDUCTOR_ETCD_KEY",
                pki.path("team.key").display().to_string(),
            ),
        ],
        &[],
    ));
    let line = refused_with_reason(&r, 11, "store_unauthorized");
    assert!(line.contains("common name"), "{r:#?}");
    // Plain http to the TLS members.
    let plain = cluster.url().replacen("https://", "http://", 1);
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[("CONDUCTOR_STORE", plain)],
        &[
            "CONDUCTOR_ETCD_CACERT",
            "CONDUCTOR_ETCD_CERT",
            "CONDUCTOR_ETCD_KEY",
        ],
    ));
    let line = refused_with_reason(&r, 11, "store_unavailable");
    assert!(line.contains("use https://"), "{r:#?}");
    // A URL that mixes http and https members: refused input.
    let first = cluster.url();
    let mixed = first.replacen(",", ",http://", 1);
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[("CONDUCTOR_STORE", mixed)],
        &[],
    ));
    let line = refused_with_reason(&r, 2, "invalid_store");
    assert!(line.contains("mixes http and https"), "{r:#?}");
    // A CA file with a clear-text URL: the user meant TLS and would not get it.
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[
            ("CONDUCTOR_STORE", "etcd://127.0.0.1:2379/x".to_string()),
            (ca.0, ca.1.clone()),
        ],
        &[],
    ));
    refused_with_reason(&r, 2, "invalid_store");

    // The same settings from config.json, paths relative to the home (the password file's
    // stays outside it: the home is searched for passwords below).
    let home = team.home.join(".conductor");
    for f in ["ca.pem", "anon.pem", "anon.key"] {
        std::fs::copy(pki.path(f), home.join(f)).unwrap();
    }
    std::fs::write(
        home.join("config.json"),
        serde_json::json!({
            "store": cluster.url(), "store_cacert": "ca.pem", "store_cert": "anon.pem",
            "store_key": "anon.key", "store_user": "team",
            "store_password_file": pki.password_file("team"),
        })
        .to_string(),
    )
    .unwrap();
    let r = keep(run_with(
        &team,
        &["--json", "status"],
        &[],
        &[
            "CONDUCTOR_STORE",
            "CONDUCTOR_ETCD_CACERT",
            "CONDUCTOR_ETCD_CERT",
            "CONDUCTOR_ETCD_KEY",
            "CONDUCTOR_ETCD_USER",
            "CONDUCTOR_ETCD_PASSWORD_FILE",
        ],
    ));
    r.code(0);
    assert!(r.stdout.contains("secure work"), "{r:#?}");

    // Nothing was read into a file or written to the prefix by any refused command.
    assert_eq!(
        cluster.dump(),
        before,
        "a refused command changed the store"
    );

    // A long-running command's command line and every output hold no password.
    let mut watch = team
        .cmd(&["watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", watch.id())).unwrap_or_default();
    let _ = watch.kill();
    let _ = watch.wait();
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    let home = files_text(&team.home);
    for user in ["root", "team", "other"] {
        let secret = pki.password(user);
        assert!(!outputs.contains(&secret), "{user}'s password in an output");
        assert!(!home.contains(&secret), "{user}'s password in the home");
        assert!(!ps.contains(&secret), "{user}'s password in ps");
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(&secret),
            "{user}'s password on a command line"
        );
    }
}

/// A conductor command with a clean environment and a temp home.
fn bare(home: &Path, args: &[&str], env: &[(&str, String)]) -> Run {
    let o = Command::new(bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", home.join(".conductor"))
        .env("CONDUCTOR_STORE_TIMEOUT", "2")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn a_password_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "hunter2-Zq9\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let env = [
        ("CONDUCTOR_STORE", "https://127.0.0.1:1/team".to_string()),
        ("CONDUCTOR_ETCD_USER", "team".into()),
        ("CONDUCTOR_ETCD_PASSWORD_FILE", file.display().to_string()),
    ];
    let r = bare(dir.path(), &["--json", "status"], &env);
    let line = refused_with_reason(&r, 2, "unsafe_credentials");
    assert!(line.contains("640"), "{r:#?}");
    assert!(!r.stdout.contains("hunter2") && !r.stderr.contains("hunter2"));
    // The same from config.json (relative to the home), and fixed by chmod 600: the command
    // then goes on to the (absent) cluster.
    let conductor_home = dir.path().join(".conductor");
    std::fs::create_dir_all(&conductor_home).unwrap();
    std::fs::write(
        conductor_home.join("config.json"),
        format!(
            r#"{{"store": "https://127.0.0.1:1/team", "store_user": "team", "store_password_file": "{}"}}"#,
            file.display()
        ),
    )
    .unwrap();
    let r = bare(dir.path(), &["--json", "status"], &[]);
    refused_with_reason(&r, 2, "unsafe_credentials");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = bare(dir.path(), &["--json", "status"], &[]);
    refused_with_reason(&r, 11, "store_unavailable");
}

#[test]
fn plain_http_to_another_machine_needs_insecure_store_and_warns_every_time() {
    let dir = tempfile::tempdir().unwrap();
    // TEST-NET-1: never this machine, never answers.
    let far = ("CONDUCTOR_STORE", "http://192.0.2.1:2379/team".to_string());
    let r = bare(
        dir.path(),
        &["--json", "status"],
        std::slice::from_ref(&far),
    );
    let line = refused_with_reason(&r, 2, "insecure_store");
    assert!(line.contains("192.0.2.1"), "{r:#?}");
    let r = bare(
        dir.path(),
        &["--json", "status"],
        &[(
            "CONDUCTOR_STORE",
            "etcd://10.1.2.3:2379,127.0.0.1:1/team".into(),
        )],
    );
    refused_with_reason(&r, 2, "insecure_store");
    for (args, env) in [
        (
            vec!["--insecure-store", "--json", "status"],
            vec![far.clone()],
        ),
        (
            vec!["--json", "status"],
            vec![far.clone(), ("CONDUCTOR_STORE_INSECURE", "1".into())],
        ),
    ] {
        let r = bare(dir.path(), &args, &env);
        assert_eq!(r.code, 11, "{r:#?}");
        assert!(
            r.stderr
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("warning: ") && l.contains("plain http")),
            "{r:#?}"
        );
    }
    // config.json's "store_insecure": true, with --quiet: still warned.
    let home = dir.path().join(".conductor");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.json"),
        r#"{"store": "http://192.0.2.1:2379/team", "store_insecure": true}"#,
    )
    .unwrap();
    let r = bare(dir.path(), &["--quiet", "--json", "status"], &[]);
    assert_eq!(r.code, 11, "{r:#?}");
    assert!(r.stderr.starts_with("warning: "), "{r:#?}");
}

/// `openssl s_server` on a free port with `cert`, once it accepts connections.
fn tls_server(pki: &Pki, cert: &str) -> (std::process::Child, u16) {
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(port.to_string())
        .arg("-cert")
        .arg(pki.path(&format!("{cert}.pem")))
        .arg("-key")
        .arg(pki.path(&format!("{cert}.key")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "s_server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, port)
}

#[test]
fn expired_and_self_signed_server_certificates_exit_11() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::make(&dir.path().join("pki"));
    for (cert, says) in [
        ("expired", "expired"),
        ("self-signed", "not signed by a CA we trust"),
    ] {
        let (mut server, port) = tls_server(&pki, cert);
        let mut env = pki.tls_env("anon");
        env.push(("CONDUCTOR_STORE", format!("https://127.0.0.1:{port}/team")));
        let r = bare(dir.path(), &["--json", "claim", "a.rs"], &env);
        let _ = server.kill();
        let _ = server.wait();
        let line = refused_with_reason(&r, 11, "store_untrusted");
        assert!(line.contains(says), "{cert}: {r:#?}");
        let v: Value = r.json();
        assert_eq!(v["status"], "error");
    }
}

/// A token etcd no longer accepts (here: authentication was disabled and enabled again; an
/// expired token is answered the same way) is renewed once, in the middle of a `claim --wait`:
/// the waiter still gets its file.
#[test]
fn a_stale_token_is_renewed_in_a_long_running_command() {
    let cluster = Cluster::secure(1);
    let root = tempfile::tempdir().unwrap();
    let mut hosts = hosts(root.path(), &cluster.url(), 2);
    for h in &mut hosts {
        h.env = cluster.env_for("team");
    }
    let ids: Vec<String> = hosts.iter().map(|h| h.start("w")).collect();
    hosts[0].run(&["claim", "src/w.rs"]).code(0);
    let waiter = hosts[1]
        .cmd(&["--json", "claim", "src/w.rs", "--wait", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        crate::common::wait_until(20.0, || {
            let st = hosts[0].run(&["--json", "status"]).json();
            st["instances"].as_array().unwrap().iter().any(|i| {
                i["id"] == ids[1].as_str() && i["waiting_for"].to_string().contains(":src/w.rs")
            })
        }),
        "host1 is queued for the file"
    );
    // Every token given before this is now refused ("invalid auth token"): etcd forgets its
    // simple tokens when authentication is enabled again.
    cluster
        .client()
        .gateway("/v3/auth/disable", &serde_json::json!({}))
        .unwrap();
    cluster
        .client()
        .gateway("/v3/auth/enable", &serde_json::json!({}))
        .unwrap();
    hosts[0].run(&["release", "src/w.rs"]).code(0);
    let o = waiter.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let st = hosts[0].run(&["--json", "status"]).json();
    let held = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == ids[1].as_str())
        .unwrap()
        .to_string();
    assert!(held.contains(":src/w.rs"), "{st}");
}
