//! The bench commands run for a short size list and write the JSON they promise.

use std::process::Command;

fn linerate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .expect("running linerate");
    assert!(
        out.status.success(),
        "linerate {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("linerate-{}-{name}", std::process::id()))
}

#[test]
fn graph_bench_writes_json_and_svg() {
    let (json, svg) = (tmp("bench.json"), tmp("bench.svg"));
    let out = linerate(&[
        "bench",
        "--seconds",
        "0.05",
        "--sizes",
        "64,1420,imix",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.contains("1420"), "table printed:\n{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["machine"].is_string() && v["engine"].is_string());
    assert_eq!(v["workers"], serde_json::json!([1]));
    assert_eq!(v["peers"], "1");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["size"], 64);
    assert_eq!(results[2]["size"], "imix");
    for r in results {
        for k in ["mpps", "gbps", "clocks_per_packet"] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {r}");
        }
    }
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("published"));
    let _ = std::fs::remove_file(json);
    let _ = std::fs::remove_file(svg);
}

#[test]
fn graph_bench_measures_each_worker_count_on_one_tunnel() {
    let json = tmp("scaling.json");
    let out = linerate(&[
        "bench",
        "--workers",
        "1,2",
        "--peers",
        "1",
        "--seconds",
        "0.05",
        "--sizes",
        "128",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("x base"), "table printed:\n{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    let shape: Vec<(u64, u64)> = results
        .iter()
        .map(|r| (r["workers"].as_u64().unwrap(), r["peers"].as_u64().unwrap()))
        .collect();
    assert_eq!(shape, [(1, 1), (2, 1)]);
    assert_eq!(results[0]["over_first_worker_count"], 1.0);
    assert!(results[1]["over_first_worker_count"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_file(json);
}

#[test]
fn crypto_bench_writes_json() {
    let json = tmp("crypto.json");
    linerate(&[
        "bench",
        "crypto",
        "--seconds",
        "0.02",
        "--sizes",
        "64,imix",
        "--no-openssl",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    // Every engine here serves all three algorithms at both sizes.
    assert!(results.len() >= 2 * 3 * 2, "{results:?}");
    for r in results {
        assert!(r["engine"].is_string() && r["alg"].is_string());
        assert!(r["mpps"].as_f64().is_some_and(|x| x > 0.0));
        assert!(r["gbps"].as_f64().is_some_and(|x| x > 0.0));
    }
    let _ = std::fs::remove_file(json);
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["bench", "--sizes", "12"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sizes go from"));
}
