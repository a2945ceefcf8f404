# fedbr's image for those who build with Docker. `make image` builds the same image without a
# daemon and is what the project builds and tests; this file is not built here. Both have the
# same static binary (CGO_ENABLED=0, -trimpath, the version stamp) at /usr/local/bin/fedbr as
# the entrypoint, user 65532:65532 (nonroot) and the same labels. The base differs: make image
# starts from an empty one and adds CA certificates, passwd/group and /tmp; this file uses
# distroless/static:nonroot, which has those and a few more files (tzdata among them; fedbr
# carries its own zone database either way).
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" -t ghcr.io/fedbr/fedbr:dev .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-X github.com/fedbr/fedbr/internal/version.version=${VERSION} -X github.com/fedbr/fedbr/internal/version.commit=${COMMIT}" \
      -o /out/fedbr ./cmd/fedbr

FROM gcr.io/distroless/static:nonroot
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.source="https://github.com/fedbr/fedbr" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/fedbr /usr/local/bin/fedbr
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/local/bin/fedbr"]
