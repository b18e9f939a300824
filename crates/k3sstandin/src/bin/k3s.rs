//! `k3s`: the one k3s stand-in. On a lab host (`FLEET_ROLE_LAB` set by the
//! host's `/usr/local/bin/k3s`) it is k3s's server and agent over the
//! lab's real etcd members and kube-apiservers; on a bare host root (the
//! actuator's and the controller's tests, `FLEET_ROLE_ROOT` alone) it is
//! k3s's CLI for `etcd-snapshot`, reading the `systemctl` stand-in's units.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("FLEET_ROLE_LAB").is_none() {
        return k3sstandin::bare::run(&args);
    }
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match rt.block_on(k3sstandin::k3s::cli::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("k3s (lab stand-in): {e:#}");
            ExitCode::from(2)
        }
    }
}
