//! Charts as plain inline SVG, drawn by the engine (no script, no library, no network).
//!
//! Every chart is one `<svg class="chart" data-chart="NAME" data-points="N">` whose marks
//! carry their value in `data-value`, so a test (or a reader of the source) can check what is
//! drawn. Labels pass through the caller's `esc` (redact, then escape).

const W: f64 = 720.0;
const H: f64 = 240.0;
const L: f64 = 56.0;
const R: f64 = 16.0;
const T: f64 = 28.0;
const B: f64 = 44.0;
/// The palette of series (colour-blind safe).
const COLOURS: [&str; 6] = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00"];

/// A marker above one bar (a gate event).
pub struct Marker {
    /// The bar's index.
    pub at: usize,
    /// What happened.
    pub text: String,
    /// Drawn in the alert colour (the gate found something).
    pub alert: bool,
}

fn open(name: &str, title: &str, points: usize, esc: &dyn Fn(&str) -> String) -> String {
    format!(
        "<svg class=\"chart\" data-chart=\"{name}\" data-points=\"{points}\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\"><title>{t}</title>\
         <text x=\"{L}\" y=\"16\" class=\"ct\">{t}</text>",
        t = esc(title)
    )
}

fn axes(max: f64, y_label: &str, esc: &dyn Fn(&str) -> String) -> String {
    let (x0, y0, y1) = (L, H - B, T);
    let mut s = format!(
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{}\" y2=\"{y0}\" class=\"ax\"/><line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" class=\"ax\"/>",
        W - R
    );
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = y0 - (y0 - y1) * f64::from(i) / 4.0;
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            fmt_num(v)
        ));
    }
    s.push_str(&format!(
        "<text x=\"14\" y=\"{:.1}\" class=\"tick\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        esc(y_label)
    ));
    s
}

/// A number for a tick: integers plainly, small values with up to 3 decimals.
pub fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.3}").trim_end_matches('0').to_string()
    }
}

/// The top of the y axis: a multiple of 4 for whole numbers (so the 4 ticks are whole), else
/// 10% above the largest value.
fn nice_max(v: f64, whole: bool) -> f64 {
    match (v <= 0.0, whole) {
        (true, true) => 4.0,
        (true, false) => 1.0,
        (false, true) => (v / 4.0).ceil() * 4.0,
        (false, false) => v * 1.1,
    }
}

fn whole(values: impl Iterator<Item = f64>) -> bool {
    values.into_iter().all(|v| (v - v.round()).abs() < 1e-9)
}

/// Bars (one per label) with an optional line on the same scale and markers above bars.
pub fn bars(
    name: &str,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
    line: Option<(&str, &[f64])>,
    markers: &[Marker],
    esc: &dyn Fn(&str) -> String,
) -> String {
    let all = || bars.iter().map(|b| b.1).chain(line.iter().flat_map(|l| l.1.iter().copied()));
    let max = nice_max(all().fold(0.0, f64::max), whole(all()));
    let mut s = open(name, title, bars.len(), esc);
    s.push_str(&axes(max, y_label, esc));
    let n = bars.len().max(1) as f64;
    let slot = (W - L - R) / n;
    let y_of = |v: f64| (H - B) - (H - B - T) * v / max;
    for (i, (label, v)) in bars.iter().enumerate() {
        let x = L + slot * i as f64 + slot * 0.15;
        let y = y_of(*v);
        s.push_str(&format!(
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" data-value=\"{}\" fill=\"{}\"><title>{}: {}</title></rect>",
            slot * 0.7,
            (H - B) - y,
            fmt_num(*v),
            COLOURS[0],
            esc(label),
            fmt_num(*v)
        ));
        if bars.len() <= 40 || i % (bars.len() / 20).max(1) == 0 {
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                x + slot * 0.35,
                H - B + 16.0,
                esc(label)
            ));
        }
    }
    if let Some((legend, values)) = line {
        let pts: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", L + slot * (i as f64 + 0.5), y_of(*v)))
            .collect();
        s.push_str(&format!(
            "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" data-value=\"{}\"/>",
            pts.join(" "),
            COLOURS[1],
            values.iter().map(|v| fmt_num(*v)).collect::<Vec<_>>().join(",")
        ));
        s.push_str(&legend_item(0, esc(y_label).as_str(), COLOURS[0]));
        s.push_str(&legend_item(1, esc(legend).as_str(), COLOURS[1]));
    }
    for m in markers.iter().filter(|m| m.at < bars.len()) {
        let cx = L + slot * (m.at as f64 + 0.5);
        let colour = if m.alert { COLOURS[5] } else { COLOURS[2] };
        s.push_str(&format!(
            "<path class=\"marker\" d=\"M{:.1},{:.1} l6,-10 l-12,0 z\" fill=\"{colour}\" data-value=\"{}\"><title>{}</title></path>",
            cx,
            T + 2.0,
            esc(&m.text),
            esc(&m.text)
        ));
    }
    s.push_str("</svg>");
    s
}

fn legend_item(i: usize, text: &str, colour: &str) -> String {
    let x = W - R - 255.0 + 85.0 * (i % 3) as f64;
    let y = H - 20.0 + 12.0 * (i / 3) as f64;
    format!(
        "<rect x=\"{x}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\">{text}</text>",
        y - 9.0,
        x + 14.0,
        y
    )
}

/// Cumulative lines over time: each series is `(name, [(time since start, value)])`, the time
/// in the unit `x_unit` names (`seconds`, `milliseconds`).
pub fn lines(
    name: &str,
    title: &str,
    y_label: &str,
    x_unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    esc: &dyn Fn(&str) -> String,
) -> String {
    let points: usize = series.iter().map(|s| s.1.len()).sum();
    let ys = || series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let max_y = nice_max(ys().fold(0.0, f64::max), whole(ys()));
    let max_x = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(0.0, f64::max).max(1.0);
    let mut s = open(name, title, points, esc);
    s.push_str(&axes(max_y, y_label, esc));
    let x_of = |x: f64| L + (W - L - R) * x / max_x;
    let y_of = |y: f64| (H - B) - (H - B - T) * y / max_y;
    for (i, (label, pts)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut path = vec![format!("{:.1},{:.1}", x_of(0.0), y_of(0.0))];
        let mut last = 0.0;
        for (x, y) in pts {
            path.push(format!("{:.1},{:.1}", x_of(*x), y_of(last)));
            path.push(format!("{:.1},{:.1}", x_of(*x), y_of(*y)));
            last = *y;
        }
        s.push_str(&format!(
            "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" data-value=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            fmt_num(last),
            esc(label)
        ));
        s.push_str(&legend_item(i, &esc(label), colour));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"middle\">{} since the run started (0 … {})</text>",
        L + 150.0,
        H - 8.0,
        esc(x_unit),
        fmt_num(max_x.round())
    ));
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_values_carried() {
        let esc = |s: &str| crate::html::escape(s);
        let svg = bars(
            "rounds",
            "t",
            "new",
            &[("<b>".into(), 2.0), ("2".into(), 0.0)],
            Some(("dry", &[0.0, 1.0])),
            &[Marker { at: 1, text: "gate3".into(), alert: false }],
            &esc,
        );
        assert!(svg.contains("data-points=\"2\"") && svg.contains("data-value=\"2\""));
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
        assert!(svg.contains("data-value=\"0,1\""));
        let l = lines("spend", "t", "usd", "seconds", &[("finder".into(), vec![(1.0, 0.5), (3.0, 1.25)])], &esc);
        assert!(l.contains("data-value=\"1.25\""));
    }
}
