//! `fleet-role-lab-probe`: a small program the real-systemd tests run inside
//! lab hosts.
//!
//! - `server` / `agent` (what a k3s unit's `ExecStart` passes): a `Type=notify`
//!   main process. It sends `READY=1` at once, as k3s does once it is ready,
//!   unless `FLEET_ROLE_LAB_PROBE_READY=never` (set through the unit's
//!   `EnvironmentFile=`), then it runs until it is stopped.
//! - `listen ADDR TEXT`: answers every TCP connection on ADDR with TEXT.
//! - `connect ADDR`: prints what ADDR answers (within 3 s), or fails.
#![forbid(unsafe_code)]

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::ExitCode,
    time::Duration,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["server" | "agent", ..] => {
            let never = std::env::var("FLEET_ROLE_LAB_PROBE_READY").is_ok_and(|v| v == "never");
            if !never && let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
                eprintln!("fleet-role-lab-probe: READY=1: {e}");
                return ExitCode::from(1);
            }
            eprintln!(
                "fleet-role-lab-probe {}: {}",
                a[0],
                if never { "never ready" } else { "sent READY=1" }
            );
            // Until systemd stops it (SIGTERM's default action ends it).
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        ["listen", addr, text] => {
            let l = match TcpListener::bind(addr) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("fleet-role-lab-probe: listen {addr}: {e}");
                    return ExitCode::from(1);
                }
            };
            for s in l.incoming().flatten() {
                let mut s = s;
                let _ = s.write_all(text.as_bytes());
            }
            ExitCode::SUCCESS
        }
        ["connect", addr] => match connect(addr) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fleet-role-lab-probe: connect {addr}: {e}");
                ExitCode::from(1)
            }
        },
        _ => {
            eprintln!("usage: fleet-role-lab-probe server|agent | listen ADDR TEXT | connect ADDR");
            ExitCode::from(2)
        }
    }
}

fn connect(addr: &str) -> std::io::Result<String> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}
