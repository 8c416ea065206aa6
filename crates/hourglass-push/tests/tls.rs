//! HTTPS on rustls: a receiver behind a TLS front whose certificate a
//! certificate authority of the test's own signed, for a name the test's
//! resolver points at 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;

use hourglass_push::{AllowList, Certificate, Outcome, PushClient};
use hourglass_test_support::certs::Authority;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::outbound::Loopback;
use crate::outcomes::{delivery, post};
use hourglass_test_support::receiver::Receiver;

const NAME: &str = "hooks.test";

/// A TLS front for `receiver` on a port of its own, with a certificate for
/// [`NAME`]; returns its address and its authority's certificate (PEM).
async fn tls_front(receiver: &Receiver) -> (SocketAddr, String) {
    let authority = Authority::new("hourglass test authority");
    let leaf = authority.issue(&[NAME], NAME);

    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der)],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    let plain = receiver.addr;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut backend) = TcpStream::connect(plain).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut backend).await;
            });
        }
    });
    (front, authority.pem())
}

fn client(front: SocketAddr, root: Option<&str>) -> PushClient {
    let mut builder = PushClient::builder()
        .allow(AllowList::parse([format!("{NAME}:{}", front.port())]).unwrap())
        .lookup(Arc::new(Loopback));
    if let Some(pem) = root {
        builder = builder.root_certificate(Certificate::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn an_https_receiver_with_a_trusted_certificate_gets_the_task() {
    let receiver = Receiver::start().await;
    let (front, authority) = tls_front(&receiver).await;
    let url = format!("https://{NAME}:{}/ok", front.port());
    let outcome = client(front, Some(&authority)).send(&delivery(post(&url))).await.outcome;
    assert_eq!(outcome, Outcome::Done);
    assert_eq!(receiver.requests(), 1);
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_failed_attempt_that_says_so() {
    let receiver = Receiver::start().await;
    let (front, _) = tls_front(&receiver).await;
    let url = format!("https://{NAME}:{}/ok", front.port());
    let outcome = client(front, None).send(&delivery(post(&url))).await.outcome;
    let Outcome::Failed { error, not_before_ms: None } = outcome else { panic!("{outcome:?}") };
    assert_eq!(
        &*error,
        format!("connection to {NAME}:{} failed: invalid peer certificate: UnknownIssuer", front.port())
    );
    assert_eq!(receiver.requests(), 0);
}
