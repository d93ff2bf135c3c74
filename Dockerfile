# Herald's container image: the static binary that `make image` builds
# (CGO off; its SQLite is pure Go) and the CA certificates, nothing else.
# Built FROM scratch, it has no shell, no package manager and no libc, so
# nothing in it but Herald can run. Build it with `make image`, which stages
# the build context in bin/image/ (the binary, the host's CA bundle, the
# empty data and tmp directories) before `docker build`.
FROM scratch

COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Owned by the numeric non-root user the image runs as, so writable by it
# (COPY gives a directory it makes mode 755): /data holds the SQLite
# database and its key file (WORKDIR, so ./herald.db lands there), /tmp
# SQLite's temporary files.
COPY --chown=65532:65532 data /data
COPY --chown=65532:65532 tmp /tmp
COPY herald /herald

USER 65532:65532
WORKDIR /data
VOLUME /data

# serve listens on every interface of the container; nodes that are no
# serve (worker, migrate) ignore it. The database is /data/herald.db
# unless HERALD_DB names another (postgres://… for several nodes).
ENV HERALD_ADDR=:8080
EXPOSE 8080

# No curl in the image: the binary asks its own /readyz (at HERALD_ADDR).
# A worker answers on its --metrics-addr instead: see compose.yaml.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/herald", "probe"]

ENTRYPOINT ["/herald"]
CMD ["serve"]
