#!/usr/bin/env bash
# `make package`: the Debian package `tandem` for Debian 12 and its MariaDB
# 10.11, from the release binaries `make build` left in target/release.
#
#   packaging/deb/build-package.sh [--out DIR] [--lintian]
#
# It writes DIR/tandem_<version>_<arch>.deb (DIR: target/debian) and prints
# its path last. With --lintian, lintian checks the package and the build
# fails on any error or warning.
#
# No debhelper: the layout is small and fixed, and dpkg-deb is in every
# Debian. What goes where, and why, is in docs/operations.md ("Installing
# the package").
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
out="$repo/target/debian"
lint=no
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=$2; shift 2 ;;
	--lintian) lint=yes; shift ;;
	*) echo "build-package.sh: unknown argument '$1' (--out DIR, --lintian)" >&2; exit 2 ;;
	esac
done

# The shared libraries' packages, as dpkg-shlibdeps finds them from the ELF
# files (it wants a debian/control to stand in).
shlib_depends() {
	local tmp
	tmp=$(mktemp -d)
	mkdir "$tmp/debian"
	printf 'Source: tandem\n\nPackage: tandem\nArchitecture: any\n' >"$tmp/debian/control"
	(cd "$tmp" && dpkg-shlibdeps -O "$@") | sed -n 's/^shlibs:Depends=//p'
	rm -rf "$tmp"
}

# The Rust crates the shipped binaries contain, each with its license, one
# per line as a continuation of copyright's header Comment.
bundled_crates() {
	cargo tree -p tandem-provider -p tandem -e normal --prefix none -f '{p}: {l}' |
		sed 's/ (\*)//; s/ ([^)]*)//' | grep -v '^tandem' | grep . | sort -u | sed 's/^/ /'
}

release="$repo/target/release"
for f in libtandem.so tandem; do
	[ -f "$release/$f" ] || { echo "build-package.sh: $release/$f is missing: run 'make build' first" >&2; exit 1; }
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -1)
[ -n "$version" ] || { echo "build-package.sh: no version in Cargo.toml" >&2; exit 1; }
arch=$(dpkg --print-architecture)
stage="$out/stage"
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$out"
cd "$repo"

# Binaries, stripped: the release profile keeps line tables for backtraces,
# which would make the package 3 times larger than it needs to be.
install -d "$stage/usr/lib/tandem" "$stage/usr/bin"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	-o "$stage/usr/lib/tandem/libtandem.so" "$release/libtandem.so"
chmod 644 "$stage/usr/lib/tandem/libtandem.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	-o "$stage/usr/bin/tandem" "$release/tandem"
chmod 755 "$stage/usr/bin/tandem"
# mariadbd runs wsrep_sst_<method> from its PATH; the script runs the tandem
# beside it.
install -m 755 packaging/sst/wsrep_sst_tandem "$stage/usr/bin/wsrep_sst_tandem"

# The files written for a hand install say /usr/local/bin; the package's
# binary is in /usr/bin. Their hand-install notes become true of the
# package too, and the unit's documentation is the gzipped copy and the
# man page.
packaged() {
	sed -e 's#/usr/local/bin#/usr/bin#g' \
		-e 's#^Documentation=file:///usr/share/doc/tandem/operations.md$#Documentation=man:tandem(1) file:///usr/share/doc/tandem/operations.md.gz#' "$1"
}
install -d "$stage/lib/systemd/system" "$stage/etc/default" "$stage/etc/mysql/mariadb.conf.d"
packaged packaging/systemd/tandem-arbitrator.service >"$stage/lib/systemd/system/tandem-arbitrator.service"
packaged packaging/systemd/tandem-arbitrator.default >"$stage/etc/default/tandem-arbitrator"
install -m 644 packaging/deb/60-tandem.cnf "$stage/etc/mysql/mariadb.conf.d/60-tandem.cnf"
chmod 644 "$stage/lib/systemd/system/tandem-arbitrator.service" "$stage/etc/default/tandem-arbitrator"

# Documentation. The drop-in for mariadb.service changes how every start of
# the distribution's server ends, so it is an example, not installed.
doc="$stage/usr/share/doc/tandem"
install -d "$doc/examples/mariadb.service.d" "$stage/usr/share/man/man1"
crates=$(bundled_crates) || { echo "build-package.sh: cargo tree failed" >&2; exit 1; }
awk -v crates="$crates" '$0 == "@BUNDLED@" { print crates; next } { print }' packaging/deb/copyright >"$doc/copyright"
chmod 644 "$doc/copyright"
for f in README.md docs/operations.md docs/durability.md docs/differences.md; do
	gzip -9n -c "$f" >"$doc/$(basename "$f").gz"
done
packaged packaging/systemd/mariadb.service.d/tandem.conf >"$doc/examples/mariadb.service.d/tandem.conf"
packaged packaging/keepalived/keepalived.conf >"$doc/examples/keepalived.conf"
chmod 644 "$doc/examples/mariadb.service.d/tandem.conf" "$doc/examples/keepalived.conf"
changelog_date=$(date -R -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
sed -e "s/@VERSION@/$version/" -e "s/@DATE@/$changelog_date/" packaging/deb/changelog |
	gzip -9n >"$doc/changelog.gz"
for page in tandem wsrep_sst_tandem; do
	gzip -9n -c "packaging/deb/$page.1" >"$stage/usr/share/man/man1/$page.1.gz"
done

# Control files. Depends: the C libraries the binaries link (dpkg-shlibdeps
# reads them from the ELF files), and a MariaDB that speaks the provider
# interface Tandem was tested with.
install -m 755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$stage/DEBIAN/"
(cd "$stage" && find etc -type f | sed 's#^#/#' | sort) >"$stage/DEBIAN/conffiles"
shlibs=$(shlib_depends "$stage/usr/lib/tandem/libtandem.so" "$stage/usr/bin/tandem")
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SHLIBS@/$shlibs/" -e "s/@SIZE@/$size/" \
	packaging/deb/control >"$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
	>"$stage/DEBIAN/md5sums"
chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

deb="$out/tandem_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
if [ "$lint" = yes ]; then
	command -v lintian >/dev/null || { echo "build-package.sh: lintian is not installed (make deps)" >&2; exit 1; }
	# --fail-on warning: an error or warning that no override explains
	# fails the build; informational tags are printed only.
	lintian --fail-on error,warning --info "$deb" >&2
fi
echo "$deb"
