//! The reports of other machines kept beside this one (`docs/benchmarks-*.md`).

use super::super::results::Results;
use std::fmt::Write;

/// Whether two runs were measured on different machines. Hosts are all
/// called `vm` here, so the name says nothing: cores, memory and kernel do.
fn other_machine(a: &Results, b: &Results) -> bool {
    let (a, b) = (&a.machine, &b.machine);
    a.cores != b.cores || a.kernel != b.kernel || (a.memory_gib - b.memory_gib).abs() >= 1.0
}

/// Where else the bench was run, so that a reader of one machine's figures
/// knows others were measured and where to find them.
pub fn render(out: &mut String, this: &Results, elsewhere: &[(String, Results)]) {
    let mut others: Vec<&(String, Results)> = elsewhere.iter().filter(|(_, r)| other_machine(this, r)).collect();
    if others.is_empty() {
        return;
    }
    others.sort_by(|a, b| a.0.cmp(&b.0));
    let _ = writeln!(out, "Also measured on other machines (reports beside this one):\n");
    let _ = writeln!(out, "| Report | Machine | Date (UTC) |\n|---|---|---|");
    for (name, r) in others {
        let m = &r.machine;
        let _ = writeln!(
            out,
            "| [{name}]({name}) | {} cores ({}), {:.1} GiB RAM, Linux {} | {} |",
            m.cores, m.cpu, m.memory_gib, m.kernel, r.date
        );
    }
    let _ = writeln!(out);
}
