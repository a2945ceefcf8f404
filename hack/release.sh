#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: fedbr's release artifacts from this checkout, under
# _output/release/VERSION (docs/development.md, "Releasing"):
#   1. refuses a VERSION that is not vMAJOR.MINOR.PATCH[-PRERELEASE], and one CHANGELOG.md has
#      no "## VERSION" entry for;
#   2. sets both charts' version (VERSION without the v) and appVersion (VERSION), and the image
#      tag the docs' install commands name; when that changed a file, or the checkout differs
#      from its commit at all, it stops there: commit, then run it again, so that the image is
#      built from (and stamped with) the commit that says VERSION;
#   3. builds the image ghcr.io/fedbr/fedbr:VERSION (make image) and checks it is that version
#      (hack/image verify: its name, every platform's label, what its binary prints);
#   4. packages both charts and checks each package's appVersion;
#   5. writes SHA256SUMS.
# It commits, tags and pushes nothing: it prints what to do next.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=${1:-}
if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release: VERSION=${version:-<empty>}: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. make release VERSION=v0.2.0" >&2
	exit 2
fi
chart_version=${version#v}
if ! grep -qE "^## ${version//./\\.}( |$)" CHANGELOG.md; then
	echo "release: CHANGELOG.md has no entry \"## $version\": write what changed for users first" >&2
	exit 2
fi
helm=${HELM:?HELM: the helm binary (make release sets it)}
image_repo=${IMAGE_REPO:-ghcr.io/fedbr/fedbr}
out=_output/release/$version
rm -rf "$out"
mkdir -p "$out"

# 2. The versions the charts and the docs name.
for c in charts/fedbr-manager charts/fedbr-agent; do
	sed -i -E "s/^version: .*/version: $chart_version/; s/^appVersion: .*/appVersion: $version/" "$c/Chart.yaml"
done
# The install commands' "# runs ghcr.io/fedbr/fedbr:vX.Y.Z" comments (test/charts TestReleaseVersions).
grep -rlE "ghcr\.io/fedbr/fedbr:v[0-9]" docs README.md | xargs -r sed -i -E "s#(ghcr\.io/fedbr/fedbr:)v[0-9][0-9A-Za-z.+-]*#\1$version#g"

if dirty=$(git status --porcelain --untracked-files=no) && [[ -n $dirty ]]; then
	echo "release: the checkout differs from its commit:" >&2
	echo "$dirty" >&2
	echo "release: review and commit it (git commit -am 'Release $version'), then run make release VERSION=$version again" >&2
	exit 3
fi

# 3. The image, and that it is this version.
make --no-print-directory image VERSION="$version" IMAGE="$image_repo:$version" IMAGE_DIR="$out/image"
(cd hack/image && go run . verify --layout "$(cd ../.. && pwd)/$out/image/oci" --tag "$image_repo:$version" --version "$version")

# 4. The charts.
for c in charts/fedbr-manager charts/fedbr-agent; do
	"$helm" package "$c" --destination "$out" >/dev/null
	pkg=$out/$(basename "$c")-$chart_version.tgz
	got=$("$helm" show chart "$pkg" | awk '$1 == "appVersion:" {print $2}')
	if [[ $got != "$version" ]]; then
		echo "release: $pkg has appVersion $got, want $version" >&2
		exit 1
	fi
	echo "chart $pkg: version $chart_version, appVersion $version"
done

# 5. Checksums of what is published.
(cd "$out" && sha256sum ./*.tgz image/fedbr-*.tar >SHA256SUMS)
echo "release $version in $out:"
cat "$out/SHA256SUMS"
cat <<NEXT

Next: tag this commit $version (git tag $version $(git rev-parse --short HEAD)), push the image
(cd hack/image && go run . push --layout $(pwd)/$out/image/oci --ref $image_repo:$version) and
publish the chart packages and SHA256SUMS with the CHANGELOG entry.
NEXT
