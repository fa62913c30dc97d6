// Imported first by tests that resolve a service name through their own DNS server: grpc-js reads
// GRPC_NODE_USE_ALTERNATIVE_RESOLVER once, when it loads, and only then honours the resolver named
// in a `dns://host:port/name` target. (Deployed, the system resolver answers: getaddrinfo.)
process.env.GRPC_NODE_USE_ALTERNATIVE_RESOLVER = "true";
