//! A fake kubelet for tests: a real tonic gRPC server on a unix socket, built from the
//! committed server code, answering the pod-resources v1 API from recorded facts (or hanging,
//! or refusing `GetAllocatableResources` like a kubelet before 1.21).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpudoctor::answers::pod_resources::PodResourcesFacts;
use gpudoctor::source::podresources::{allocatable_to_wire, pod_to_wire};

/// The generated server trait, next to the library's messages it refers to as `super::`.
#[allow(clippy::all, dead_code)]
mod v1 {
    pub use gpudoctor::source::podresources::v1::*;
    include!("../../src/source/podresources/v1_server.rs");
}

use v1::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};

#[derive(Clone)]
pub enum Behaviour {
    /// Answer both calls from the facts.
    Serve(Arc<PodResourcesFacts>),
    /// Answer `List`, refuse `GetAllocatableResources` (a kubelet before 1.21).
    NoAllocatable(Arc<PodResourcesFacts>),
    /// Accept, then never answer.
    Hang,
}

struct FakeKubelet(Behaviour);

fn allocatable_of(facts: &PodResourcesFacts) -> v1::AllocatableResourcesResponse {
    allocatable_to_wire(facts.allocatable_value().expect("fixture answered"))
}

fn list_of(facts: &PodResourcesFacts) -> v1::ListPodResourcesResponse {
    v1::ListPodResourcesResponse {
        pod_resources: facts
            .list_value()
            .expect("fixture answered")
            .iter()
            .map(pod_to_wire)
            .collect(),
    }
}

#[tonic::async_trait]
impl PodResourcesLister for FakeKubelet {
    async fn list(
        &self,
        _: tonic::Request<v1::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::ListPodResourcesResponse>, tonic::Status> {
        match &self.0 {
            Behaviour::Serve(f) | Behaviour::NoAllocatable(f) => {
                Ok(tonic::Response::new(list_of(f)))
            }
            Behaviour::Hang => std::future::pending().await,
        }
    }
    async fn get_allocatable_resources(
        &self,
        _: tonic::Request<v1::AllocatableResourcesRequest>,
    ) -> Result<tonic::Response<v1::AllocatableResourcesResponse>, tonic::Status> {
        match &self.0 {
            Behaviour::Serve(f) => Ok(tonic::Response::new(allocatable_of(f))),
            Behaviour::NoAllocatable(_) => Err(tonic::Status::unimplemented(
                "unknown method GetAllocatableResources for service v1.PodResourcesLister",
            )),
            Behaviour::Hang => std::future::pending().await,
        }
    }
    async fn get(
        &self,
        _: tonic::Request<v1::GetPodResourcesRequest>,
    ) -> Result<tonic::Response<v1::GetPodResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not served by the fake"))
    }
}

/// A server on `<dir>/kubelet.sock`, running on its own thread until the process ends.
pub fn serve(dir: &Path, behaviour: Behaviour) -> PathBuf {
    let path = dir.join("kubelet.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(PodResourcesListerServer::new(FakeKubelet(behaviour)))
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await
                .unwrap();
        });
    });
    path
}
