# rttscope in a container: built with the toolchain, run from a slim image.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p rttscope --bin rttscope

FROM debian:bookworm-slim
COPY --from=build /src/target/release/rttscope /usr/local/bin/rttscope
EXPOSE 6033 6070
ENTRYPOINT ["rttscope"]
CMD ["--config", "/etc/rttscope/rttscope.yaml"]
