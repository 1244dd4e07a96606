//! The `--kubernetes` flags.

use clap::Parser;

use super::*;

#[derive(Debug, Parser)]
struct Cli {
    config: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
}

#[test]
fn the_flag_takes_no_value_and_the_defaults_fit_the_ha_install() {
    let cli =
        Cli::try_parse_from(["valkyrie", "--kubernetes", "/etc/valkyrie/sentinel.conf"]).unwrap();
    assert!(cli.kube.kubernetes);
    assert_eq!(cli.config.as_deref(), Some("/etc/valkyrie/sentinel.conf"));
    assert_eq!(cli.kube.kubernetes_quorum, 2);
    assert_eq!(cli.kube.cluster_domain, "cluster.local");
    assert_eq!(cli.kube.kubernetes_namespace, None);

    let cli = Cli::try_parse_from([
        "valkyrie",
        "x.conf",
        "--kubernetes-namespace",
        "shop",
        "--kubernetes-quorum",
        "1",
    ])
    .unwrap();
    assert!(!cli.kube.kubernetes);
    assert_eq!(cli.kube.kubernetes_namespace.as_deref(), Some("shop"));
    assert_eq!(cli.kube.kubernetes_quorum, 1);
    assert!(Cli::try_parse_from(["valkyrie", "--kubernetes-quorum", "0"]).is_err());
}
