package valkyrie.clients;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS for every client of the driver, on when VALKYRIE_CLIENT_TLS_CA names
 * a PEM CA file: VALKYRIE_CLIENT_TLS_CERT and VALKYRIE_CLIENT_TLS_KEY then
 * name the client certificate and its unencrypted PKCS#8 PEM key (Valkey's
 * default {@code tls-auth-clients yes} asks for one). The same settings
 * reach the sentinels and the data nodes.
 *
 * The libraries that want a trust store and a key store get PKCS12 stores
 * built in memory from the PEM files here; Lettuce (and Spring on it) reads
 * the PEM files itself.
 */
final class Tls {

    /** The key store's password: the store never leaves this process. */
    private static final char[] PASSWORD = "valkyrie".toCharArray();

    static final File CA = file("VALKYRIE_CLIENT_TLS_CA");
    static final File CERT = file("VALKYRIE_CLIENT_TLS_CERT");
    static final File KEY = file("VALKYRIE_CLIENT_TLS_KEY");

    private static TrustManagerFactory trust;
    private static KeyManagerFactory keys;
    private static SSLContext context;

    private Tls() {
    }

    private static File file(String var) {
        String v = System.getenv(var);
        return v == null || v.isEmpty() ? null : new File(v);
    }

    /** Whether the clients connect over TLS. */
    static boolean on() {
        return CA != null;
    }

    /** Checks the settings once, before any client starts. */
    static void check() {
        if (on() && (CERT == null || KEY == null)) {
            throw new IllegalStateException(
                    "VALKYRIE_CLIENT_TLS_CA is set: VALKYRIE_CLIENT_TLS_CERT and VALKYRIE_CLIENT_TLS_KEY are needed too");
        }
    }

    /** The CA as a trust manager factory. */
    static synchronized TrustManagerFactory trustManagers() throws Exception {
        if (trust == null) {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(null, null);
            int i = 0;
            for (Certificate c : certificates(CA)) {
                store.setCertificateEntry("ca" + i++, c);
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            trust = tmf;
        }
        return trust;
    }

    /** The client certificate and key as a key manager factory. */
    static synchronized KeyManagerFactory keyManagers() throws Exception {
        if (keys == null) {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(null, null);
            Certificate[] chain = certificates(CERT).toArray(new Certificate[0]);
            store.setKeyEntry("client", privateKey(KEY), PASSWORD, chain);
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(store, PASSWORD);
            keys = kmf;
        }
        return keys;
    }

    /** An SSLContext with both. */
    static synchronized SSLContext sslContext() throws Exception {
        if (context == null) {
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(keyManagers().getKeyManagers(), trustManagers().getTrustManagers(), null);
            context = ctx;
        }
        return context;
    }

    private static Collection<? extends Certificate> certificates(File pem) throws Exception {
        try (InputStream in = new FileInputStream(pem)) {
            return CertificateFactory.getInstance("X.509").generateCertificates(in);
        }
    }

    /** An unencrypted PKCS#8 key ("BEGIN PRIVATE KEY"): EC, RSA or Ed25519. */
    private static PrivateKey privateKey(File pem) throws Exception {
        String text = Files.readString(pem.toPath(), StandardCharsets.US_ASCII);
        String begin = "-----BEGIN PRIVATE KEY-----";
        String end = "-----END PRIVATE KEY-----";
        int b = text.indexOf(begin);
        int e = text.indexOf(end);
        if (b < 0 || e < b) {
            throw new IllegalArgumentException(pem + ": no unencrypted PKCS#8 PEM key (BEGIN PRIVATE KEY)");
        }
        byte[] der = Base64.getMimeDecoder().decode(text.substring(b + begin.length(), e));
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        GeneralSecurityException last = null;
        for (String alg : new String[] {"EC", "RSA", "Ed25519"}) {
            try {
                return KeyFactory.getInstance(alg).generatePrivate(spec);
            } catch (GeneralSecurityException x) {
                last = x;
            }
        }
        throw last;
    }
}
