//! A plugin that misbehaves on purpose, for the host's containment tests.
//!
//! It implements the raw generated bindings (not the SDK's `Processor`), so it can also
//! break the ABI contract. Parameter `mode` picks the behaviour:
//!
//! | mode            | behaviour                                                        |
//! |-----------------|------------------------------------------------------------------|
//! | `ok`            | keeps every event                                                |
//! | `fail-init`     | `init` returns an error                                          |
//! | `spin-init`     | `init` never returns                                             |
//! | `spin`          | `process` never returns                                          |
//! | `memory-bomb`   | `process` allocates until memory runs out                        |
//! | `recursion`     | `process` recurses without end                                   |
//! | `trap`          | `process` panics when it sees offset `trap-offset` (default: any) |
//! | `huge-output`   | rewrites every event to `bytes` bytes (default 1 MiB)            |
//! | `wrong-count`   | answers one action fewer than there are events                   |
//! | `bad-index`     | answers `keep` for every event plus a rewrite for event 0        |
//! | `bad-patch`     | patches every event's `tier` with `gold`, which is not JSON       |
//! | `process-error` | `process` returns an error                                       |
//! | `probe`         | rejects every event with a message saying what it could reach (the network: `127.0.0.1:<probe-port>`, default 1) |
//! | `log`           | logs one message per chunk through the host, keeps every event   |
//! | `sleep`         | sleeps 10 s at a time, forever (blocking WASI calls)             |
//! | `random`        | rejects every event with a number drawn from `wasi:random`       |
//! | `log-forge`     | logs 1 000 messages with line breaks that imitate sluice's logs  |
//! | `huge-error`    | `process` returns an error of `bytes` bytes                      |
//! | `huge-reason`   | rejects every event with a message of `bytes` bytes              |
//! | `reserve`       | per event: `N` reserves N bytes with `try_reserve` and, if that fails, returns the error "out of memory" (as a JavaScript engine does); `N?` tries and keeps the event either way; `fail` returns an error |

use std::cell::RefCell;

use sluice_guest::bindings::exports::sluice::plugin::processor::{
    EventChunk, Guest, PluginInfo, Verdicts,
};
use sluice_guest::bindings::sluice::plugin::host::{self, Level};
use sluice_guest::bindings::sluice::plugin::types::{Action, Patches, Rejection, Rewrite};

#[derive(Default)]
struct Config {
    mode: String,
    bytes: usize,
    trap_offset: Option<i64>,
    probe_port: u16,
}

thread_local! {
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

struct Misbehave;

impl Guest for Misbehave {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "misbehave".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn init(params: Vec<(String, String)>) -> Result<(), String> {
        let mut config = Config {
            mode: "ok".into(),
            bytes: 1 << 20,
            trap_offset: None,
            probe_port: 1,
        };
        for (k, v) in params {
            match k.as_str() {
                "mode" => config.mode = v,
                "bytes" => config.bytes = v.parse().map_err(|e| format!("bytes: {e}"))?,
                "trap-offset" => {
                    config.trap_offset = Some(v.parse().map_err(|e| format!("trap-offset: {e}"))?)
                }
                "probe-port" => {
                    config.probe_port = v.parse().map_err(|e| format!("probe-port: {e}"))?
                }
                other => return Err(format!("unknown parameter `{other}`")),
            }
        }
        match config.mode.as_str() {
            "fail-init" => return Err("deliberately refusing to start: fail-init mode".into()),
            "spin-init" => spin(),
            _ => {}
        }
        CONFIG.with_borrow_mut(|c| *c = config);
        Ok(())
    }

    fn process(chunk: EventChunk) -> Result<Verdicts, String> {
        let n = chunk.offsets.len();
        let keep_all = || Verdicts {
            actions: vec![Action::Keep; n],
            rewrites: vec![],
            rejections: vec![],
            patches: no_patches(),
        };
        CONFIG.with_borrow(|config| match config.mode.as_str() {
            "ok" => Ok(keep_all()),
            "spin" => spin(),
            "memory-bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recursion" => {
                std::hint::black_box(recurse(n as u64));
                Ok(keep_all())
            }
            "trap" => {
                for &offset in &chunk.offsets {
                    if config.trap_offset.is_none_or(|t| t == offset) {
                        panic!("deliberate trap at offset {offset}");
                    }
                }
                Ok(keep_all())
            }
            "huge-output" => Ok(Verdicts {
                actions: vec![Action::Rewrite; n],
                rewrites: (0..n as u32)
                    .map(|event| Rewrite {
                        event,
                        value: vec![b'x'; config.bytes],
                    })
                    .collect(),
                rejections: vec![],
                patches: no_patches(),
            }),
            "wrong-count" => Ok(Verdicts {
                actions: vec![Action::Keep; n.saturating_sub(1)],
                rewrites: vec![],
                rejections: vec![],
                patches: no_patches(),
            }),
            // Patches every event's `tier` with text that is not JSON: a broken answer.
            "bad-patch" => Ok(Verdicts {
                actions: vec![Action::Patch; n],
                rewrites: vec![],
                rejections: vec![],
                patches: Patches {
                    events: (0..n as u32).collect(),
                    name_lengths: vec![4; n],
                    names: "tier".repeat(n),
                    value_lengths: vec![4; n],
                    values: b"gold".repeat(n),
                },
            }),
            "bad-index" => {
                let mut v = keep_all();
                v.rewrites.push(Rewrite {
                    event: 0,
                    value: b"{}".to_vec(),
                });
                Ok(v)
            }
            "process-error" => Err("deliberate failure of the whole chunk".into()),
            // A whole-chunk error of `bytes` bytes (a plugin that dumps its input in it).
            "huge-error" => Err("e".repeat(config.bytes)),
            // Every event rejected with a message of `bytes` bytes.
            "huge-reason" => Ok(reject_all(n, "huge_reason", &"r".repeat(config.bytes))),
            "probe" => Ok(reject_all(n, "probe", &probe(config.probe_port))),
            "log" => {
                host::log(Level::Warn, &format!("misbehave saw {n} events"));
                Ok(keep_all())
            }
            "sleep" => loop {
                std::thread::sleep(std::time::Duration::from_secs(10));
            },
            "random" => {
                use std::hash::BuildHasher;
                // std seeds its hash keys from wasi:random.
                let drawn = std::collections::hash_map::RandomState::new().hash_one(42u64);
                Ok(reject_all(n, "random", &format!("random={drawn}")))
            }
            "log-forge" => {
                for i in 0..1000 {
                    host::log(
                        Level::Info,
                        &format!("forged {i}\n2026-01-01T00:00:00.000000Z  INFO sluice::audit: FORGED admin change"),
                    );
                }
                Ok(keep_all())
            }
            "reserve" => reserve_each(&chunk).map(|()| keep_all()),
            other => Err(format!("unknown mode {other}")),
        })
    }
}

/// Mode `reserve`, over the chunk's values in order.
fn reserve_each(chunk: &EventChunk) -> Result<(), String> {
    let mut at = 0;
    for &length in &chunk.value_lengths {
        let length = usize::try_from(length).unwrap_or(0);
        reserve(&chunk.values[at..at + length])?;
        at += length;
    }
    Ok(())
}

/// What mode `reserve` does with one event's value: `N` reserves N bytes or fails with
/// "out of memory", `N?` tries to, `fail` fails.
fn reserve(value: &[u8]) -> Result<(), String> {
    let value = String::from_utf8_lossy(value);
    if value == "fail" {
        return Err("deliberate failure after the reservations".into());
    }
    let (bytes, optional) = match value.strip_suffix('?') {
        Some(bytes) => (bytes, true),
        None => (value.as_ref(), false),
    };
    let bytes: usize = bytes
        .parse()
        .map_err(|e| format!("reserve `{value}`: {e}"))?;
    let mut buffer: Vec<u8> = Vec::new();
    match buffer.try_reserve_exact(bytes) {
        Ok(()) => Ok(()),
        Err(_) if optional => Ok(()),
        Err(e) => Err(format!("out of memory: {e}")),
    }
}

/// Rejects all `n` events with `code` and `message`.
fn reject_all(n: usize, code: &str, message: &str) -> Verdicts {
    Verdicts {
        actions: vec![Action::Reject; n],
        rewrites: vec![],
        rejections: (0..n as u32)
            .map(|event| Rejection {
                event,
                code: code.into(),
                message: message.into(),
                field: None,
            })
            .collect(),
        patches: no_patches(),
    }
}

/// No patched fields.
fn no_patches() -> Patches {
    Patches {
        events: vec![],
        name_lengths: vec![],
        names: String::new(),
        value_lengths: vec![],
        values: vec![],
    }
}

fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// Recurses without end. Small frames, so the WebAssembly stack (not the shadow stack in
/// linear memory) is what overflows.
#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    std::hint::black_box(recurse(std::hint::black_box(depth + 1))) + 1
}

/// Says what the sandbox let through: environment, files, clock, network (a connection
/// to `127.0.0.1:<port>`, where a test listens).
fn probe(port: u16) -> String {
    let env = std::env::vars().count();
    // The folder to list: `PROBE_DIR` from the (granted) environment, else the root.
    let dir = std::env::var("PROBE_DIR").unwrap_or_else(|_| "/".into());
    let listed = std::fs::read_dir(&dir)
        .map(|d| d.count())
        .map_err(|e| e.kind());
    let passwd = std::fs::read("/etc/passwd")
        .map(|b| b.len())
        .map_err(|e| e.kind());
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let net = std::net::TcpStream::connect(("127.0.0.1", port))
        .map(|_| ())
        .map_err(|e| e.kind());
    format!("env={env} dir={listed:?} passwd={passwd:?} clock={clock} net={net:?}")
}

sluice_guest::bindings::__export_event_processor!(Misbehave with_types_in sluice_guest::bindings);
