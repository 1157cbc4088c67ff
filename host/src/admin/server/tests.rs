//! A flood of idle connections: `/healthz` still answers at once, at most
//! `max-connections` stay open, and the idle ones are closed after `idle-timeout`.

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::super::tests::{send, start_with};

/// Whether the server still holds `stream` open: no end of stream, no reset.
fn still_open(mut stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
        Ok(_) | Err(_) => false,
    }
}

fn healthz(addr: std::net::SocketAddr) {
    let request = b"GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n";
    let answer = send(addr, request, Duration::from_secs(1));
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
}

#[test]
fn a_flood_of_idle_connections_is_bounded_and_timed_out() {
    let (admin, _found) = start_with("max-connections = 8\nidle-timeout = \"3s\"");
    let admin = admin.unwrap();
    let started = Instant::now();
    let flood: Vec<TcpStream> = (0..58)
        .map(|_| TcpStream::connect(admin.addr()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    healthz(admin.addr());
    let open = flood.iter().filter(|s| still_open(s)).count();
    assert!(
        open <= 8,
        "{open} idle connections of 58 still open, at most 8"
    );
    assert!(open >= 1, "the newest idle ones are kept until the timeout");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "checked before the timeout"
    );
    std::thread::sleep(
        Duration::from_secs(3).saturating_sub(started.elapsed()) + Duration::from_secs(1),
    );
    let open = flood.iter().filter(|s| still_open(s)).count();
    assert_eq!(open, 0, "idle connections are closed after idle-timeout");
    healthz(admin.addr());
}
