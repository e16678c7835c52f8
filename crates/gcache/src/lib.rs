//! Durable storage for Tandem's group log (placeholder; being written).
