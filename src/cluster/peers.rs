//! `BrokerChannels`: this broker's connections to the others for the
//! requests it sends them itself (transaction markers, verification of a
//! transactional produce), one blocking [`BrokerChannel`] per peer, kept
//! open between calls. The replica fetchers keep their own.
//!
//! A peer is found in the image, on its inter-broker listener. A call
//! takes the peer's open channel (or connects), and gives it back only
//! after a whole answer was read: a channel that failed is dropped, since
//! its stream may be out of step, and the next call connects anew. Two
//! calls to one peer at once each get a channel.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use parking_lot::Mutex;

use super::channel::{BrokerChannel, ChannelError};
use super::channel_security::ChannelSecurity;
use super::image::ImageWatcher;

/// The largest answer taken from a peer (markers' and verifications'
/// answers are small).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

pub struct BrokerChannels {
    node_id: i32,
    image: Arc<ImageWatcher>,
    timeout: Duration,
    security: Arc<ChannelSecurity>,
    idle: Mutex<HashMap<i32, Vec<BrokerChannel>>>,
}

impl std::fmt::Debug for BrokerChannels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerChannels").field("node_id", &self.node_id).finish_non_exhaustive()
    }
}

impl BrokerChannels {
    /// Channels from broker `node_id`, each read and write bounded by
    /// `timeout`, authenticated as `security` says.
    pub fn new(
        node_id: i32,
        image: Arc<ImageWatcher>,
        timeout: Duration,
        security: Arc<ChannelSecurity>,
    ) -> Self {
        Self { node_id, image, timeout, security, idle: Mutex::default() }
    }

    /// The cluster as this broker applied it.
    pub fn image(&self) -> Arc<super::image::MetadataImage> {
        self.image.current()
    }

    /// Send `request` at `version` to broker `node` and wait for its answer.
    ///
    /// # Errors
    /// The peer has no endpoint to reach, or the call failed.
    pub fn call<R: Request>(
        &self,
        node: i32,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ChannelError> {
        let open = self.idle.lock().get_mut(&node).and_then(Vec::pop);
        let mut channel = match open {
            Some(c) => c,
            None => self.connect(node)?,
        };
        let answer = channel.call(version, request)?;
        self.idle.lock().entry(node).or_default().push(channel);
        Ok(answer)
    }

    fn connect(&self, node: i32) -> Result<BrokerChannel, ChannelError> {
        let (host, port) = self
            .image
            .current()
            .inter_broker_endpoint(node)
            .map_err(|e| ChannelError::Protocol(e, node))?;
        let client_id = format!("broker-{}", self.node_id);
        let bounds = (self.timeout, MAX_RESPONSE_BYTES);
        BrokerChannel::connect(node, (&host, port), &client_id, bounds, &self.security)
    }
}
