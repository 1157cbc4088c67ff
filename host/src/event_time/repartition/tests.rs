//! Repartition records: origins read back, keys placed by murmur2, markers to every
//! partition, and stage two taking each event once however often stage one sent it.

use std::collections::BTreeMap;

use super::*;
use crate::record::Header;

fn headers(record: &Repartitioned) -> Vec<Header> {
    record
        .headers
        .iter()
        .map(|(name, value)| Header {
            name: (*name).to_string(),
            value: Some(value.clone()),
        })
        .collect()
}

fn origin(partition: &str, offset: i64) -> Origin {
    Origin {
        partition: partition.into(),
        offset,
    }
}

#[test]
fn an_origin_reads_back_and_junk_is_refused() {
    let o = origin("clicks.v1/12", 40);
    assert_eq!(o.header(), "clicks.v1/12@40");
    assert_eq!(Origin::parse(&o.header()), Some(o));
    for junk in ["", "clicks@4", "clicks/x@4", "clicks/1@", "clicks/1"] {
        assert_eq!(Origin::parse(junk), None, "{junk}");
    }
}

#[test]
fn events_go_where_murmur2_puts_their_key_and_markers_go_everywhere() {
    assert!(Outlet::new("t", 0).is_err());
    let outlet = Outlet::new(&topic_name("web", "counts"), 4).unwrap();
    assert_eq!(outlet.topic(), "web-counts-repartition");
    let mut used = std::collections::BTreeSet::new();
    for key in ["click", "view", "buy", "search", "scroll", "share"] {
        let event = outlet.event(key, b"{}", &origin("clicks/0", 1));
        let murmur2 = Partitioner::Murmur2.partition(key.as_bytes(), 4).unwrap();
        assert_eq!(event.partition, murmur2, "{key}");
        assert_eq!(event.key.as_deref(), Some(key.as_bytes()));
        used.insert(event.partition);
    }
    assert!(used.len() > 1, "every key in one partition: {used:?}");
    let read = BTreeMap::from([
        ("clicks/0".to_string(), (9, Some(Micros(5_000_000)))),
        ("clicks/3".to_string(), (2, None)),
    ]);
    let markers = outlet.markers(&read, None);
    assert_eq!(markers.len(), 8);
    for p in 0..4 {
        let to_p: Vec<_> = markers.iter().filter(|m| m.partition == p).collect();
        assert_eq!(to_p.len(), 2);
        assert!(to_p.iter().all(|m| m.key.is_none() && m.value.is_none()));
        let mut seen = Seen::default();
        assert_eq!(
            seen.admit(&headers(to_p[0])),
            Arrival::Marker {
                origin: origin("clicks/0", 9),
                time: Some(Micros(5_000_000)),
                ended: false,
            }
        );
        assert_eq!(
            seen.admit(&headers(to_p[1])),
            Arrival::Marker {
                origin: origin("clicks/3", 2),
                time: None,
                ended: false,
            }
        );
        assert_eq!(seen, Seen::default(), "a marker takes no offset");
    }
}

/// Stage one's batches of two source partitions, as sent: batch 2 of partition 0 sent
/// twice (a replay after a crash), and a frozen member's late copy of batch 1 after it.
#[test]
fn stage_two_takes_each_event_once_however_often_stage_one_sent_it() {
    let outlet = Outlet::new("p-dedup-repartition", 3).unwrap();
    let event = |p: i32, offset: i64| {
        let key = format!("event-{p}-{offset}");
        outlet.event(&key, key.as_bytes(), &origin(&format!("src/{p}"), offset))
    };
    let batch = |p: i32, offsets: std::ops::Range<i64>| offsets.map(move |o| event(p, o));
    let sent: Vec<Repartitioned> = batch(0, 0..5)
        .chain(batch(1, 0..4))
        .chain(batch(0, 5..9))
        .chain(batch(0, 5..9)) // replayed
        .chain(batch(1, 4..7))
        .chain(batch(0, 0..5)) // a frozen member's copy
        .chain(batch(0, 9..12))
        .collect();
    let mut seen: BTreeMap<i32, Seen> = BTreeMap::new();
    let mut taken = Vec::new();
    let mut again = 0;
    for record in &sent {
        match seen
            .entry(record.partition)
            .or_default()
            .admit(&headers(record))
        {
            Arrival::Event(o) => taken.push((o.partition, o.offset)),
            Arrival::Again(_) => again += 1,
            other => panic!("{other:?}"),
        }
    }
    taken.sort();
    let expected: Vec<(String, i64)> = (0..12)
        .map(|o| ("src/0".to_string(), o))
        .chain((0..7).map(|o| ("src/1".to_string(), o)))
        .collect();
    assert_eq!(taken, expected);
    assert_eq!(again, 9);
    // What a commit records reads back.
    for s in seen.values() {
        assert_eq!(Seen::from_json(&s.to_json()).as_ref(), Some(s));
    }
}

#[test]
fn records_not_from_stage_one_are_told_apart() {
    let mut seen = Seen::default();
    let header = |name: &str, value: &str| Header {
        name: name.into(),
        value: Some(value.as_bytes().to_vec()),
    };
    assert!(matches!(seen.admit(&[]), Arrival::Foreign(_)));
    let bad = [header(ORIGIN_HEADER, "nowhere")];
    assert!(matches!(seen.admit(&bad), Arrival::Foreign(why) if why.contains("nowhere")));
    let bad_time = [
        header(ORIGIN_HEADER, "src/0@3"),
        header(EVENT_TIME_HEADER, "soon"),
    ];
    assert!(matches!(seen.admit(&bad_time), Arrival::Foreign(why) if why.contains("soon")));
    assert_eq!(seen, Seen::default());
}

/// Ended markers: a source partition ends where its marker says; an older copy (a frozen
/// member's) leaves it ended, an event or a marker from further on does not. What a commit
/// records reads back, and the older form (offsets alone) still reads.
#[test]
fn a_source_partition_ends_until_stage_one_reads_further() {
    let outlet = Outlet::new("p-counts-repartition", 1).unwrap();
    let marker = |p: &str, offset: i64, ended: bool| {
        let read = BTreeMap::from([(p.to_string(), (offset, Some(Micros(1))))]);
        let ended = read.keys().filter(|_| ended).cloned().collect();
        headers(&outlet.markers(&read, Some(&ended))[0])
    };
    let mut seen = Seen::default();
    let origins = ["src/0", "src/1"];
    assert!(matches!(
        seen.admit(&marker("src/0", 4, true)),
        Arrival::Marker { ended: true, .. }
    ));
    assert!(!seen.all_ended(origins.into_iter()), "src/1 goes on");
    seen.admit(&marker("src/1", 2, true));
    assert!(seen.all_ended(origins.into_iter()));
    seen.admit(&marker("src/1", 1, false)); // a frozen member's older marker
    assert!(seen.all_ended(origins.into_iter()));
    assert_eq!(Seen::from_json(&seen.to_json()).as_ref(), Some(&seen));
    let event = outlet.event("k", b"{}", &origin("src/1", 3));
    assert_eq!(
        seen.admit(&headers(&event)),
        Arrival::Event(origin("src/1", 3))
    );
    assert!(
        !seen.all_ended(origins.into_iter()),
        "src/1 was read further"
    );
    seen.admit(&marker("src/0", 5, false));
    assert_eq!(seen.ended, BTreeMap::new());
    let older = Seen::from_json(r#"{"src/0":7}"#).unwrap();
    assert_eq!(older.taken, BTreeMap::from([("src/0".to_string(), 7)]));
    assert_eq!(older.to_json(), r#"{"src/0":7}"#);
}
