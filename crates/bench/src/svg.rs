//! A small SVG line chart: Gbit/s against packet size, our series as lines, the
//! published figures as labelled points. No dependencies; the output is plain SVG.

use std::fmt::Write as _;

pub struct Series {
    pub label: String,
    /// (packet size in bytes, Gbit/s)
    pub points: Vec<(f64, f64)>,
}

/// A published figure drawn beside ours.
pub struct Reference {
    pub label: &'static str,
    pub size: f64,
    pub gbps: f64,
}

/// The single-core WireGuard figures of the published FD.io VPP guide (Xeon D-2798NX
/// at 2.1 GHz, one core encrypting one stream and decrypting another).
pub const PUBLISHED: &[Reference] = &[
    Reference {
        label: "VPP + intel-ipsec-mb",
        size: 66.0,
        gbps: 1.799,
    },
    Reference {
        label: "VPP + intel-ipsec-mb",
        size: 1420.0,
        gbps: 10.486,
    },
    Reference {
        label: "Linux kernel",
        size: 66.0,
        gbps: 0.250,
    },
    Reference {
        label: "Linux kernel",
        size: 1420.0,
        gbps: 5.274,
    },
    Reference {
        label: "VPP + QAT",
        size: 66.0,
        gbps: 3.377,
    },
    Reference {
        label: "VPP + QAT",
        size: 1420.0,
        gbps: 56.921,
    },
];

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];
const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn chart(title: &str, series: &[Series], refs: &[Reference]) -> String {
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(refs.iter().map(|r| r.size))
        .fold(1600.0_f64, f64::max);
    let ymax_data = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(refs.iter().map(|r| r.gbps))
        .fold(1.0_f64, f64::max);
    // A round top for the y axis.
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        .into_iter()
        .find(|s| ymax_data / s <= 8.0)
        .unwrap_or(200.0);
    let ymax = (ymax_data / step).ceil() * step;
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / xmax * pw;
    let y = |v: f64| TOP + ph - v / ymax * ph;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        LEFT,
        esc(title)
    );
    // grid and axes
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            LEFT + pw,
            y(v),
            y(v)
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{v}</text>"#,
            LEFT - 6.0,
            y(v) + 4.0
        );
        v += step;
    }
    for xs in [64.0, 256.0, 512.0, 1024.0, 1420.0] {
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{xs}</text>"#,
            x(xs),
            TOP + ph + 18.0
        );
    }
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{}" stroke="black"/>"#,
        TOP + ph
    );
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" x2="{}" y1="{}" y2="{}" stroke="black"/>"#,
        LEFT + pw,
        TOP + ph,
        TOP + ph
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">packet size (bytes)</text>"#,
        LEFT + pw / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">Gbit/s</text>"#,
        TOP + ph / 2.0
    );
    // our series
    let mut legend_y = TOP + 10.0;
    for (i, s) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(a, b)| format!("{:.1},{:.1}", x(a), y(b)))
            .collect();
        let _ = writeln!(
            o,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for &(a, b) in &s.points {
            let _ = writeln!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                x(a),
                y(b)
            );
        }
        let lx = LEFT + pw + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" x2="{}" y1="{legend_y}" y2="{legend_y}" stroke="{c}" stroke-width="2"/>"#,
            lx + 20.0
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 26.0,
            legend_y + 4.0,
            esc(&s.label)
        );
        legend_y += 18.0;
    }
    // published points: one marker shape per label
    let mut labels: Vec<&str> = Vec::new();
    for r in refs {
        if !labels.contains(&r.label) {
            labels.push(r.label);
        }
    }
    for (i, label) in labels.iter().enumerate() {
        let c = ["#555", "#999", "#000"][i % 3];
        for r in refs.iter().filter(|r| r.label == *label) {
            let (cx, cy) = (x(r.size), y(r.gbps));
            let _ = writeln!(
                o,
                r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="none" stroke="{c}" stroke-width="2" transform="rotate(45 {cx:.1} {cy:.1})"/>"#,
                cx - 4.0,
                cy - 4.0
            );
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{c}">{}</text>"#,
                cx + 7.0,
                cy - 6.0,
                r.gbps
            );
        }
        let lx = LEFT + pw + 15.0;
        let _ = writeln!(
            o,
            r#"<rect x="{}" y="{}" width="8" height="8" fill="none" stroke="{c}" stroke-width="2"/>"#,
            lx + 6.0,
            legend_y - 4.0
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}">{} (published)</text>"#,
            lx + 26.0,
            legend_y + 4.0,
            esc(label)
        );
        legend_y += 18.0;
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_point_and_label() {
        let s = chart(
            "t <1>",
            &[Series {
                label: "ours".into(),
                points: vec![(64.0, 2.0), (1420.0, 14.0)],
            }],
            PUBLISHED,
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains("VPP + QAT (published)") && s.contains("t &lt;1&gt;"));
    }
}
