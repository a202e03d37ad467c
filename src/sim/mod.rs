//! A simulated Kubernetes API server (placeholder until the simulator lands).
#![allow(missing_docs, dead_code)]

#[derive(Debug, Clone)]
pub struct Scenario;
impl Scenario {
    pub fn preset(_: &str) -> Option<Scenario> {
        None
    }
    pub fn preset_names() -> Vec<&'static str> {
        vec![]
    }
}
pub struct Simulator;
impl Simulator {
    pub async fn start(_: Scenario) -> Result<Simulator, std::io::Error> {
        Err(std::io::Error::other("not yet"))
    }
    pub fn url(&self) -> String {
        String::new()
    }
    pub fn write_kubeconfig(&self, _: &std::path::Path) -> std::io::Result<()> {
        Ok(())
    }
    pub async fn shutdown(self) {}
}
pub fn customise(_: &mut Scenario, _: Option<usize>, _: Option<usize>, _: bool) {}
