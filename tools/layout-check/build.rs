//! Generates `layout_asserts.rs`: Rust's layout of every C API struct,
//! asserted at compile time against what the target's C compiler makes of
//! `include/rungs/*.h` (which `include/rungs.h` includes). See src/lib.rs.
//!
//! The C compiler is chosen from the target (override: RUNGS_LAYOUT_CC, a
//! command line). RUNGS_LAYOUT_SELFTEST=1 deliberately expects one wrong
//! size, to show the check fails when the layouts differ.

use std::path::{Path, PathBuf};
use std::process::Command;

struct CStruct {
    name: String,
    fields: Vec<String>,
    rust_path: String,
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("..").join("..");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let target = std::env::var("TARGET").expect("cargo sets it");
    // rungs.h includes the tier headers; the structs are declared in them.
    let header = root.join("include").join("rungs");
    let ffi = root.join("src").join("ffi");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed={}", ffi.display());
    println!("cargo:rerun-if-env-changed=RUNGS_LAYOUT_CC");
    println!("cargo:rerun-if-env-changed=RUNGS_LAYOUT_SELFTEST");
    println!("cargo:rerun-if-env-changed=RUNGS_LAYOUT_REPORT");

    let mut tiers: Vec<PathBuf> = std::fs::read_dir(&header)
        .expect("read include/rungs/")
        .map(|entry| entry.expect("list include/rungs/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "h"))
        .collect();
    tiers.sort();
    let text: String = tiers
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("read a header of include/rungs/"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut structs = parse_structs(&text);
    assert!(
        !structs.is_empty(),
        "no structs found in {}",
        header.display()
    );
    for s in &mut structs {
        s.rust_path = rust_path(&ffi, &s.name);
    }

    let c_numbers = c_layout(&structs, &root, &out, &compiler(&target));
    let selftest = std::env::var("RUNGS_LAYOUT_SELFTEST").is_ok_and(|v| v == "1");
    let mut asserts = String::new();
    let mut numbers = c_numbers.iter();
    let mut next = || *numbers.next().expect("one C number per Rust assertion");
    let mut fields = 0;
    for (i, s) in structs.iter().enumerate() {
        let (p, n) = (&s.rust_path, &s.name);
        let size = next() + u64::from(selftest && i == 0);
        let align = next();
        asserts.push_str(&format!(
            "const _: () = assert!(core::mem::size_of::<{p}>() == {size}, \
             \"{n}: Rust's size differs from C's ({size}) on {target}\");\n\
             const _: () = assert!(core::mem::align_of::<{p}>() == {align}, \
             \"{n}: Rust's alignment differs from C's ({align}) on {target}\");\n"
        ));
        for f in &s.fields {
            let offset = next();
            asserts.push_str(&format!(
                "const _: () = assert!(core::mem::offset_of!({p}, {f}) == {offset}, \
                 \"{n}.{f}: Rust's offset differs from C's ({offset}) on {target}\");\n"
            ));
            fields += 1;
        }
    }
    std::fs::write(out.join("layout_asserts.rs"), asserts).expect("write layout_asserts.rs");
    if let Ok(report) = std::env::var("RUNGS_LAYOUT_REPORT") {
        // Written again whenever it is missing (cargo reruns this script).
        println!("cargo:rerun-if-changed={report}");
        let line = format!(
            "layout: {} structs, {} fields of include/rungs/*.h: size, alignment and offsets compared between C and Rust for {target}\n",
            structs.len(),
            fields
        );
        std::fs::write(report, line).expect("write RUNGS_LAYOUT_REPORT");
    }
}

/// The C compiler for `target`: the one a game on that target would use.
fn compiler(target: &str) -> Vec<String> {
    let line = std::env::var("RUNGS_LAYOUT_CC").unwrap_or_else(|_| {
        match target {
            "i686-pc-windows-gnu" => "i686-w64-mingw32-gcc",
            "x86_64-pc-windows-gnu" => "x86_64-w64-mingw32-gcc",
            "i686-unknown-linux-gnu" => "gcc -m32",
            _ => "cc",
        }
        .to_string()
    });
    line.split_whitespace().map(str::to_string).collect()
}

/// Every `typedef struct name { ... } name;` of cbindgen's header with its
/// field names, in order. Forward declarations (opaque handles) have no body.
fn parse_structs(header: &str) -> Vec<CStruct> {
    let mut structs = Vec::new();
    let mut current: Option<CStruct> = None;
    for line in header.lines() {
        let trimmed = line.trim();
        if let Some(s) = current.as_mut() {
            if trimmed.starts_with('}') {
                structs.push(current.take().expect("inside a struct"));
            } else if is_code(trimmed) && trimmed.ends_with(';') {
                s.fields.push(field_name(trimmed));
            }
        } else if let Some(rest) = trimmed.strip_prefix("typedef struct ") {
            if let Some(name) = rest.strip_suffix(" {") {
                current = Some(CStruct {
                    name: name.trim().to_string(),
                    fields: Vec::new(),
                    rust_path: String::new(),
                });
            }
        }
    }
    structs
}

fn is_code(line: &str) -> bool {
    !(line.is_empty() || line.starts_with("/*") || line.starts_with('*') || line.starts_with("//"))
}

/// The declared name of a field line: `uint8_t key[16];` → `key`,
/// `void (RUNGS_CALL *cb)(void *user);` → `cb`.
fn field_name(decl: &str) -> String {
    let decl = decl.trim_end_matches(';');
    let declarator = match decl.find("(RUNGS_CALL *").or_else(|| decl.find("(*")) {
        Some(at) => {
            let rest = &decl[at..];
            let star = rest.find('*').expect("pointer declarator");
            let end = rest.find(')').expect("closing parenthesis");
            &rest[star + 1..end]
        }
        None => decl.split('[').next().expect("split yields one item"),
    };
    let name = declarator
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| panic!("no field name in `{decl}`"));
    name.to_string()
}

/// `rungs::ffi::MODULE::name` for the `pub struct name` in src/ffi.
fn rust_path(ffi: &Path, name: &str) -> String {
    let mut entries: Vec<_> = std::fs::read_dir(ffi)
        .expect("read src/ffi")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("read a src/ffi file");
        let defines = text.lines().any(|l| {
            l.trim_start()
                .strip_prefix("pub struct ")
                .and_then(|rest| rest.strip_prefix(name))
                .is_some_and(|after| after.starts_with([' ', '{', '(', ';', '<']))
        });
        if defines {
            let module = path
                .file_stem()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            return if module == "mod" {
                format!("rungs::ffi::{name}")
            } else {
                format!("rungs::ffi::{module}::{name}")
            };
        }
    }
    panic!("include/rungs/ declares struct {name}, but no `pub struct {name}` is in src/ffi");
}

/// Size, alignment and every field offset of each struct, in order, as the
/// C compiler lays them out: compiled to assembly as an array of `unsigned`
/// (each plus 1, so no run of zeros is folded into `.zero`), read back from
/// its `.long` lines up to the all-ones end mark.
fn c_layout(structs: &[CStruct], root: &Path, out: &Path, cc: &[String]) -> Vec<u64> {
    let mut c = String::from(
        "#include <stddef.h>\n#include \"rungs.h\"\n\nconst unsigned rungs_layout[] = {\n",
    );
    for s in structs {
        let n = &s.name;
        c.push_str(&format!(
            "    1u + (unsigned)sizeof({n}),\n    1u + (unsigned)_Alignof({n}),\n"
        ));
        for f in &s.fields {
            c.push_str(&format!("    1u + (unsigned)offsetof({n}, {f}),\n"));
        }
    }
    c.push_str("    0xFFFFFFFFu\n};\n");
    let source = out.join("layout.c");
    let asm = out.join("layout.s");
    std::fs::write(&source, c).expect("write layout.c");
    let status = Command::new(&cc[0])
        .args(&cc[1..])
        .args(["-std=c11", "-O0", "-S", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg("-o")
        .arg(&asm)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(status.success(), "{cc:?} failed on {}", source.display());
    let text = std::fs::read_to_string(&asm).expect("read layout.s");
    let mut numbers = Vec::new();
    for line in text.lines() {
        let Some(value) = line.trim().strip_prefix(".long") else {
            continue;
        };
        let value = value.trim();
        let parsed: i64 = match value.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16).expect("hex .long"),
            None => value
                .parse()
                .unwrap_or_else(|_| panic!("unexpected .long {value}")),
        };
        let value = (parsed as u64) & 0xFFFF_FFFF;
        if value == 0xFFFF_FFFF {
            break;
        }
        numbers.push(value - 1);
    }
    let expected: usize = structs.iter().map(|s| 2 + s.fields.len()).sum();
    assert_eq!(
        numbers.len(),
        expected,
        "read {} numbers from {}, expected {expected}",
        numbers.len(),
        asm.display()
    );
    numbers
}
