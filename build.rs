//! Generates the C headers from the Rust sources with cbindgen: one cbindgen
//! run, cut into items and written as `include/rungs/{common,lockstep,
//! session,pieces}.h` in topic order by `build/headers.rs`, and
//! `include/rungs.h`, which includes them all.
//!
//! The headers are committed; `make header-check` checks that a fresh build
//! leaves `include/` unchanged (`git diff --exit-code include/`, untracked
//! files included).

use std::path::PathBuf;

#[path = "build/headers.rs"]
mod headers;

fn main() {
    let crate_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/headers.rs");

    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml must parse");
    let config_header = config.header.clone().unwrap_or_default();
    let config_after_includes = config.after_includes.clone().unwrap_or_default();
    let config_autogen = config.autogen_warning.clone().unwrap_or_default();
    // Only the C API's own files, starting at src/ffi/mod.rs and following
    // its `mod` lines: constants elsewhere in the crate (ladder limits,
    // policy thresholds) are Rust API, not C API.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src").join("ffi").join("mod.rs"));
    let bindings = match builder.generate() {
        Ok(bindings) => bindings,
        Err(e) => panic!("cbindgen could not generate include/rungs.h: {e}"),
    };
    let mut raw = Vec::new();
    bindings.write(&mut raw);
    let text = with_c89_comments(&with_calling_convention(
        &String::from_utf8(raw).expect("cbindgen writes UTF-8"),
    ));
    let headers = headers::write_headers(
        output_body(&text, &config_after_includes),
        config_header.trim(),
        &config_after_includes,
        config_autogen.trim(),
    );
    set_soname(&text);
    let include = crate_dir.join("include");
    std::fs::create_dir_all(include.join("rungs")).expect("create include/rungs/");
    // A header no longer in the manifest would linger, committed and stale.
    for entry in std::fs::read_dir(include.join("rungs")).expect("list include/rungs/") {
        let path = entry.expect("list include/rungs/").path();
        let name = format!(
            "rungs/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        if !headers.contains_key(&name) {
            std::fs::remove_file(&path).unwrap_or_else(|e| panic!("remove include/{name}: {e}"));
        }
    }
    for (name, text) in headers {
        let path = include.join(&name);
        // Rewritten only when its text changes, so builds do not churn timestamps.
        if std::fs::read(&path).unwrap_or_default() != text.as_bytes() {
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("write include/{name}: {e}"));
        }
    }
}

/// The declarations of cbindgen's output: after its preamble (the includes
/// and `after_includes`), before the include guard's `#endif`.
fn output_body<'a>(text: &'a str, after_includes: &str) -> &'a str {
    let start = text
        .find(after_includes.trim())
        .map(|at| at + after_includes.trim().len())
        .expect("cbindgen's output contains cbindgen.toml's after_includes");
    let end = text
        .rfind("#endif")
        .expect("cbindgen closes its include guard");
    &text[start..end]
}

/// Put `RUNGS_CALL` (cdecl, defined in the header's preamble from
/// cbindgen.toml) where C wants a calling convention: before the name of
/// every function cbindgen declared (after its `RUNGS_API`) and
/// before the `*` of every function pointer, `(*name)(` becoming
/// `(RUNGS_CALL *name)(`. cbindgen has no setting for either: it writes a
/// convention only for non-C ABIs.
fn with_calling_convention(header: &str) -> String {
    let mut out = String::with_capacity(header.len() + 4096);
    // cbindgen puts `RUNGS_API` on a line of its own before a long declaration.
    let mut declaration_follows = false;
    for line in header.split_inclusive('\n') {
        let is_comment = line.trim_start().starts_with('*')
            || line.trim_start().starts_with("/*")
            || line.trim_start().starts_with("//");
        let declares_function = declaration_follows || line.starts_with("RUNGS_API ");
        declaration_follows = line.trim_end() == "RUNGS_API";
        if is_comment || declaration_follows {
            out.push_str(line);
        } else if declares_function {
            let at = function_name_start(line)
                .unwrap_or_else(|| panic!("no function name in header line: {line}"));
            out.push_str(&line[..at]);
            out.push_str("RUNGS_CALL ");
            out.push_str(&line[at..]);
        } else {
            out.push_str(&with_pointer_convention(line));
        }
    }
    out
}

/// Byte offset of the first identifier in `line` that is followed by `(`:
/// the declared function's name (return types never are).
fn function_name_start(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || !is_ident(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            if bytes.get(i) == Some(&b'(') {
                return Some(start);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// `(*name)(` → `(RUNGS_CALL *name)(`, for every function pointer on the line.
fn with_pointer_convention(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = rest.find("(*") {
        let after = &rest[at + 2..];
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let is_function_pointer = name_len > 0 && after[name_len..].starts_with(")(");
        out.push_str(&rest[..at + 1]);
        if is_function_pointer {
            out.push_str("RUNGS_CALL ");
        }
        out.push('*');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// cbindgen closes its `extern "C"` guard with `#endif // __cplusplus`; C89
/// has no `//` comments and `-std=c89 -pedantic-errors` refuses the tokens
/// after `#endif`, so a preprocessor or brace line's trailing `// text`
/// becomes `/* text */` (an old compiler is exactly what a mod may build with).
fn with_c89_comments(header: &str) -> String {
    let mut out = String::with_capacity(header.len() + 64);
    for line in header.split_inclusive('\n') {
        let code = line.trim_start();
        match line.find("//") {
            Some(at) if code.starts_with('#') || code.starts_with('}') => {
                let comment = line[at + 2..].trim();
                out.push_str(line[..at].trim_end());
                out.push_str(" /* ");
                out.push_str(comment);
                out.push_str(" */\n");
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// On Linux the shared library's SONAME is `librungs.so.<ABI version>`
/// (decision 100 in docs/decisions.md): a program linked against it
/// loads only a library of the same C ABI. The linker writes that name into
/// every program linked here, so a link of that name beside the library
/// cargo builds keeps the build tree's own C programs (ffi-tests,
/// examples-c, pkg-config's build-tree check) running; `make install` and
/// `make dist` make the installed links.
fn set_soname(header: &str) {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let abi = header
        .lines()
        .find_map(|l| l.strip_prefix("#define RUNGS_ABI_VERSION "))
        .map(str::trim)
        .expect("the C API defines RUNGS_ABI_VERSION");
    let soname = format!("librungs.so.{abi}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    // OUT_DIR is <profile dir>/build/rungs-<hash>/out; cargo puts the
    // library in <profile dir>.
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = match out.ancestors().nth(3) {
        Some(dir)
            if out.ancestors().nth(2).and_then(|d| d.file_name()) == Some("build".as_ref()) =>
        {
            dir
        }
        _ => {
            println!(
                "cargo:warning=OUT_DIR {} is not <profile>/build/<crate>/out: no {soname} link \
                 beside librungs.so, so C programs linked against it in the build tree will not load",
                out.display()
            );
            return;
        }
    };
    let link = profile_dir.join(&soname);
    if std::fs::read_link(&link).ok().as_deref() != Some("librungs.so".as_ref()) {
        let _ = std::fs::remove_file(&link);
        #[cfg(unix)]
        std::os::unix::fs::symlink("librungs.so", &link)
            .unwrap_or_else(|e| panic!("link {} to librungs.so: {e}", link.display()));
    }
}
